"""Where agents come in: REST (``rest``, ``serializers``, ``tool_shapes``), MCP (``mcp_server``,
``mcp_http``, ``mcp_schema``) and Dify's External Knowledge API (``dify_api``, ``dify``,
``dify_conditions``). Each is a thin shape over the same lookup and the same recording."""
