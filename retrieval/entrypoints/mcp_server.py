"""agentkb as an MCP server (the official ``mcp`` SDK, FastMCP API of mcp 1.x).

Tools: ``lookup_knowledge`` (the same service and action memory as the REST tool) and
``get_knowledge_map``; prompts: ``executor`` and ``planner``. Two transports:

- stdio: ``python manage.py mcp_server`` (a local agent starts it as a child process);
- streamable HTTP under ``/mcp/``: ``config.asgi`` routes ``/mcp`` to ``mcp_http_app()`` behind
  ``McpTokenAuth`` (the REST tool tokens) and everything else to Django.

Session: an agent's lookups share action memory per MCP session (``Mcp-Session-Id`` over HTTP,
one id per connection on stdio) unless the call passes its own ``session_id``; either way the
session is the agent's own (``retrieval.agents.identity``), and an agent limited to some domains sees only
those in its lookups, knowledge map and planner prompt. ``retrieval.entrypoints.mcp_http`` guards the HTTP
transport: Host and Origin, the token, the session's owner, the per-agent session cap and the
shared throttle budget.

FastMCP runs tools on the event loop; the ORM may not, so each tool hands its work to
``sync_to_async`` (one worker thread, as Django's own ASGI handler does).
"""

from __future__ import annotations

import json
import logging
import uuid

import pydantic
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from knowledge.selectors import knowledge_map_build
from retrieval.agents import texts as agent_texts
from retrieval.agents.identity import Agent, agent_named
from retrieval.agents.scopes import knowledge_map_scoped
from retrieval.agents.tracker import TrackerUnavailable
from retrieval.entrypoints.mcp_http import AGENT_SCOPE_KEY, McpTokenAuth, db_call
from retrieval.entrypoints.mcp_schema import lookup_arguments
from retrieval.selectors import executor_prompt_get, lookup_tool_definition, planner_prompt_render
from retrieval.services import lookup_knowledge as lookup_knowledge_service

logger = logging.getLogger(__name__)

SERVER_NAME = "agentkb"
STDIO_AGENT = "mcp-stdio"
_SESSION_ATTR = "_agentkb_session_id"


def mcp_session_id(ctx: Context) -> str:
    """The action-memory session of this MCP session.

    HTTP: ``mcp-<Mcp-Session-Id>`` (what the client sees in its headers). stdio has no id on the
    wire: one is minted per connection and kept on the SDK's session object.
    """
    session = ctx.request_context.session
    existing = getattr(session, _SESSION_ATTR, None)
    if existing:
        return existing
    request = ctx.request_context.request
    header = request.headers.get("mcp-session-id") if request is not None else None
    minted = f"mcp-{header or uuid.uuid4().hex}"[:128]
    setattr(session, _SESSION_ATTR, minted)
    return minted


def _agent(ctx: Context, stdio_agent: str | None) -> Agent:
    """The caller: the token's agent over HTTP (set by McpTokenAuth), the named one on stdio."""
    request = ctx.request_context.request
    agent = request.scope.get(AGENT_SCOPE_KEY) if request is not None else None
    return agent if isinstance(agent, Agent) else agent_named(stdio_agent or STDIO_AGENT)


def _field_errors(exc: ValidationError) -> str:
    return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())


def _token_agent(ctx: Context) -> Agent | None:
    """The token's agent over HTTP (its profile may set the agent-facing language); None on
    stdio, which has no token and speaks the global AGENT_LANGUAGE."""
    request = ctx.request_context.request
    caller = None if request is None else request.scope.get(AGENT_SCOPE_KEY)
    return caller if isinstance(caller, Agent) and caller.id is not None else None


def _language(token_agent: Agent | None) -> str | None:
    return token_agent.language_in_force if token_agent else None


def _lookup_in_agent_language(*, token_agent: Agent | None, **kwargs):
    """The lookup service, answering in the language of the calling agent's profile."""
    return lookup_knowledge_service(**kwargs, language=_language(token_agent))


def _argument_errors(exc: BaseException) -> str | None:
    """``field: message; ...`` from the first pydantic ValidationError in ``exc``'s chain (how the
    SDK reports arguments that do not fit a tool's or prompt's signature), or None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, pydantic.ValidationError):
            return "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: "
                + (
                    "not an argument it takes"
                    if error["type"] == "unexpected_keyword_argument"
                    else error["msg"]
                )
                for error in seen.errors(include_url=False, include_input=False, include_context=False)
            )
        seen = seen.__cause__ or seen.__context__
    return None


class AgentkbMCP(FastMCP):
    """FastMCP whose errors name the argument at fault, as REST's do, and never the Python behind
    a tool or prompt: the SDK's own texts read "1 validation error for
    build_server.<locals>.planner", "... for lookup_knowledgeArguments", echo the input and link
    pydantic's site. An unexpected failure is logged and answered in general terms."""

    async def call_tool(self, name: str, arguments: dict):
        tool = self._tool_manager.get_tool(name)
        if tool is not None and isinstance(arguments, dict):
            # The SDK ignores arguments a tool does not take; an agent sending "domain" for
            # "domains" would silently search everything. Refused, named, as REST does.
            taken = set(tool.fn_metadata.arg_model.model_fields)
            unknown = sorted(str(key)[:64] for key in arguments if key not in taken)
            if unknown:
                raise ToolError(
                    f"{name}: " + "; ".join(f"{key}: not an argument it takes" for key in unknown)
                )
        try:
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            fields = _argument_errors(exc)
            if fields is not None:
                raise ToolError(f"{name}: {fields}") from None
            if isinstance(exc.__cause__, ToolError):  # raised by agentkb's tool: names the field
                raise ToolError(f"{name}: {exc.__cause__}") from None
            if name not in {tool.name for tool in await self.list_tools()}:
                raise ToolError(f"unknown tool {agent_texts.echoed(name)}") from None
            logger.error("MCP tool %s failed", name, exc_info=exc.__cause__ or exc)
            raise ToolError(f"{name}: the call failed on the server; try again later") from None

    async def get_prompt(self, name: str, arguments: dict | None = None):
        try:
            return await super().get_prompt(name, arguments)
        except ValueError as exc:
            fields = _argument_errors(exc)
            if fields is not None:
                raise ValueError(f"{name}: {fields}") from None
            if name not in {prompt.name for prompt in await self.list_prompts()}:
                raise ValueError(f"unknown prompt {agent_texts.echoed(name)}") from None
            logger.error("MCP prompt %s failed: %s", name, exc)
            raise ValueError(f"{name}: the prompt could not be rendered; try again later") from None


def hide_session_argument(server: FastMCP, tool_name: str) -> None:
    """Take ``session_id`` out of the schema a model sees (the MCP session is the session; a model
    asked to fill it invents ids and breaks the action memory). The tool still accepts it, for
    clients that keep memory across separate runs."""
    tool = server._tool_manager.get_tool(tool_name)
    tool.parameters["properties"].pop("session_id", None)
    if "required" in tool.parameters:
        tool.parameters["required"] = [name for name in tool.parameters["required"] if name != "session_id"]


def build_server(*, agent: str | None = None) -> FastMCP:
    """A FastMCP server with agentkb's tools and prompts.

    ``agent`` names the caller in recorded invocations on stdio (HTTP uses the token's agent).
    """
    server = AgentkbMCP(
        SERVER_NAME,
        instructions=agent_texts.text("mcp_instructions"),
        streamable_http_path="/mcp",
        # Host checks are Django's ALLOWED_HOSTS, done by McpTokenAuth; the SDK's own defaults
        # would refuse every host name but localhost.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        # A fresh transport per request: every web worker serves every session, whose owner and
        # id live in the shared registry (``mcp_sessions``), not in this process.
        stateless_http=True,
    )
    lookup_description = lookup_tool_definition()["function"]["description"]

    @server.tool(name="lookup_knowledge", description=lookup_description, structured_output=False)
    @lookup_arguments()
    async def lookup_knowledge(
        query: str,
        ctx: Context,
        session_id: str | None = None,
        top_k: int | None = None,
        domains: list[str] | None = None,
        metadata_condition: dict | None = None,
    ) -> str:
        """Look up the knowledge base; documents this session already has are withheld."""
        session = session_id if session_id is not None else mcp_session_id(ctx)
        caller = _agent(ctx, agent)
        try:
            outcome = await sync_to_async(db_call)(
                _lookup_in_agent_language,
                token_agent=None if agent else _token_agent(ctx),
                query=query,
                session_id=session,
                top_k=top_k,
                agent=caller.name,
                source="mcp",
                agent_id=caller.id,
                domains=caller.domains,
                filter_domains=domains,
                metadata_condition=metadata_condition,
            )
        except ValidationError as exc:
            raise ToolError(_field_errors(exc)) from None
        except TrackerUnavailable as exc:
            raise ToolError(f"the session action memory is unavailable: {exc}") from None
        body = {**outcome.body, "invocationId": outcome.invocation_public_id, "sessionId": session}
        return json.dumps(body, ensure_ascii=False)

    hide_session_argument(server, "lookup_knowledge")

    @server.tool(
        name="get_knowledge_map",
        description=agent_texts.text("mcp_knowledge_map"),
        structured_output=False,
    )
    async def get_knowledge_map(ctx: Context) -> str:
        knowledge_map = await sync_to_async(db_call)(knowledge_map_build)
        knowledge_map = knowledge_map_scoped(knowledge_map, _agent(ctx, agent).domains)
        return json.dumps(knowledge_map, ensure_ascii=False)

    @server.prompt(name="executor", description=agent_texts.text("mcp_executor_prompt"))
    async def executor(ctx: Context) -> str:
        language = await sync_to_async(db_call)(_language, token_agent=None if agent else _token_agent(ctx))
        return await sync_to_async(executor_prompt_get)(language)

    @server.prompt(name="planner", description=agent_texts.text("mcp_planner_prompt"))
    async def planner(ctx: Context) -> str:
        language = await sync_to_async(db_call)(_language, token_agent=None if agent else _token_agent(ctx))
        knowledge_map = await sync_to_async(db_call)(knowledge_map_build)
        scoped = knowledge_map_scoped(knowledge_map, _agent(ctx, agent).domains)
        return await sync_to_async(db_call)(planner_prompt_render, knowledge_map=scoped, language=language)

    return server


def mcp_http_app(server: FastMCP | None = None):
    """(asgi_app, session_manager) for streamable HTTP; the caller runs ``session_manager.run()``
    for the life of the process (config.asgi does it in the ASGI lifespan)."""
    from mcp.server.fastmcp.server import StreamableHTTPASGIApp

    server = server or build_server()
    server.streamable_http_app()  # creates the session manager
    manager = server.session_manager
    return McpTokenAuth(StreamableHTTPASGIApp(manager), manager), manager
