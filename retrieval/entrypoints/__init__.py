"""Where agents come in: REST (``rest``, ``serializers``, ``tool_shapes``), MCP (``mcp_server``,
``mcp_http``, ``mcp_schema``) and Dify's External Knowledge API (``dify_api``, ``dify``; its
condition language is the lookup's own, ``retrieval.lookup.metadata_conditions``). Each is a thin
shape over the same lookup and the same recording."""
