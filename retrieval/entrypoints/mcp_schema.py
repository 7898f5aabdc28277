"""The MCP ``lookup_knowledge`` tool's input schema: the REST tool's, limits and descriptions.

FastMCP derives a tool's input schema from the function's signature. ``lookup_arguments``
annotates ``query``, ``session_id`` and ``top_k`` with the JSON schema of the REST definition
(``retrieval.selectors.lookup_tool_definition``: ``query`` 1..RETRIEVAL_MAX_QUERY_CHARS
characters, ``session_id`` 1..128, ``top_k`` 1..100) through pydantic's ``WithJsonSchema``: the
limits are advertised to clients but not enforced by the SDK, so the lookup service still
validates, names the field and records the refused call, as it does for REST. ``session_id``
stays optional over MCP (the MCP session is the default) and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import WithJsonSchema

from retrieval.agents import texts as agent_texts
from retrieval.lookup.inputs import MAX_SESSION_ID_CHARS


def lookup_input_properties(language: str | None = None) -> dict[str, dict]:
    """The JSON schema of each MCP argument: the REST property, ``session_id`` described for MCP."""
    from retrieval.selectors import lookup_tool_definition

    properties = lookup_tool_definition(language)["function"]["parameters"]["properties"]
    session = {
        "type": "string",
        "description": agent_texts.text("mcp_session_id", language),
        "minLength": 1,
        "maxLength": MAX_SESSION_ID_CHARS,
    }
    return {**properties, "session_id": session}


def lookup_arguments(language: str | None = None) -> Callable:
    """A decorator giving a tool function ``(query, ctx, session_id=None, top_k=None,
    domains=None, metadata_condition=None)`` the REST schema of its arguments (replacing their annotations, which may be
    strings). ``session_id`` is then taken out of the advertised schema
    (``mcp_server.hide_session_argument``)."""
    properties = lookup_input_properties(language)

    def annotate(fn: Callable) -> Callable:
        fn.__annotations__.update(
            query=Annotated[str, WithJsonSchema(properties["query"])],
            session_id=Annotated[str | None, WithJsonSchema(properties["session_id"])],
            top_k=Annotated[int | None, WithJsonSchema(properties["top_k"])],
            domains=Annotated[list[str] | None, WithJsonSchema(properties["domains"])],
            # Any: the lookup parses it and names the sub-field at fault, and records the refusal.
            metadata_condition=Annotated[Any, WithJsonSchema(properties["metadata_condition"])],
        )
        return fn

    return annotate
