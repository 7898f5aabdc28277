"""agentkb as an MCP server (the official ``mcp`` SDK, FastMCP API of mcp 1.x).

Tools: ``lookup_knowledge`` (the same service and action memory as the REST tool) and
``get_knowledge_map``; prompts: ``executor`` and ``planner``. Two transports:

- stdio: ``python manage.py mcp_server`` (a local agent starts it as a child process);
- streamable HTTP under ``/mcp/``: ``config.asgi`` routes ``/mcp`` to ``mcp_http_app()`` behind
  ``McpTokenAuth`` (the REST tool tokens) and everything else to Django.

Session: an agent's lookups share action memory per MCP session (``Mcp-Session-Id`` over HTTP,
one id per connection on stdio) unless the call passes its own ``session_id``.

FastMCP runs tools on the event loop; the ORM may not, so each tool hands its work to
``sync_to_async`` (one worker thread, as Django's own ASGI handler does).
"""

from __future__ import annotations

import json
import uuid

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from knowledge.selectors import knowledge_map_build, planner_prompt_render
from retrieval import agent_texts
from retrieval.language import agent_language
from retrieval.mcp_schema import lookup_arguments
from retrieval.selectors import executor_prompt_get, lookup_tool_definition
from retrieval.services import lookup_knowledge as lookup_knowledge_service
from retrieval.tracker import TrackerUnavailable

SERVER_NAME = "agentkb"
AGENT_SCOPE_KEY = "agentkb.agent"  # set in the ASGI scope by McpTokenAuth
STDIO_AGENT = "mcp-stdio"
_SESSION_ATTR = "_agentkb_session_id"


def _db_call(fn, /, **kwargs):
    """Run ``fn`` like a Django request: stale connections closed before and after."""
    close_old_connections()
    try:
        return fn(**kwargs)
    finally:
        close_old_connections()


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


def _agent(ctx: Context) -> str:
    request = ctx.request_context.request
    if request is None:
        return STDIO_AGENT
    return request.scope.get(AGENT_SCOPE_KEY) or "mcp-http"


def _field_errors(exc: ValidationError) -> str:
    return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())


def _token_agent(ctx: Context) -> str | None:
    """The token's agent over HTTP (its profile may set the agent-facing language); None on stdio,
    which has no token and speaks the global AGENT_LANGUAGE."""
    request = ctx.request_context.request
    caller = None if request is None else request.scope.get(AGENT_SCOPE_KEY)
    # The scope holds the token's username (or an agent object naming it).
    return caller if isinstance(caller, str) or caller is None else getattr(caller, "name", None)


def _language(token_agent: str | None) -> str | None:
    return agent_language(token_agent) if token_agent else None


def _lookup_in_agent_language(*, token_agent: str | None, **kwargs):
    """The lookup service, answering in the language of the calling agent's profile."""
    return lookup_knowledge_service(**kwargs, language=_language(token_agent))


def build_server(*, agent: str | None = None) -> FastMCP:
    """A FastMCP server with agentkb's tools and prompts.

    ``agent`` names the caller in recorded invocations on stdio (HTTP uses the token's agent).
    """
    server = FastMCP(
        SERVER_NAME,
        instructions=agent_texts.text("mcp_instructions"),
        streamable_http_path="/mcp",
        # Host checks are Django's ALLOWED_HOSTS, done by McpTokenAuth; the SDK's own defaults
        # would refuse every host name but localhost.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    lookup_description = lookup_tool_definition()["function"]["description"]

    @server.tool(name="lookup_knowledge", description=lookup_description, structured_output=False)
    @lookup_arguments()
    async def lookup_knowledge(
        query: str, ctx: Context, session_id: str | None = None, top_k: int | None = None
    ) -> str:
        """Look up the knowledge base; documents this session already has are withheld."""
        session = session_id if session_id is not None else mcp_session_id(ctx)
        caller = agent or _agent(ctx)
        try:
            outcome = await sync_to_async(_db_call)(
                _lookup_in_agent_language,
                token_agent=None if agent else _token_agent(ctx),
                query=query,
                session_id=session,
                top_k=top_k,
                agent=caller,
                source="mcp",
            )
        except ValidationError as exc:
            raise ToolError(_field_errors(exc)) from None
        except TrackerUnavailable as exc:
            raise ToolError(f"the session action memory is unavailable: {exc}") from None
        body = {**outcome.body, "invocationId": outcome.invocation_id, "sessionId": session}
        return json.dumps(body, ensure_ascii=False)

    @server.tool(
        name="get_knowledge_map",
        description=agent_texts.text("mcp_knowledge_map"),
        structured_output=False,
    )
    async def get_knowledge_map() -> str:
        knowledge_map = await sync_to_async(_db_call)(knowledge_map_build)
        return json.dumps(knowledge_map, ensure_ascii=False)

    @server.prompt(name="executor", description=agent_texts.text("mcp_executor_prompt"))
    async def executor(ctx: Context) -> str:
        language = await sync_to_async(_db_call)(_language, token_agent=None if agent else _token_agent(ctx))
        return await sync_to_async(executor_prompt_get)(language)

    @server.prompt(name="planner", description=agent_texts.text("mcp_planner_prompt"))
    async def planner(ctx: Context) -> str:
        language = await sync_to_async(_db_call)(_language, token_agent=None if agent else _token_agent(ctx))
        return await sync_to_async(_db_call)(planner_prompt_render, language=language)

    return server


def _json_error(status: int, code: str, message: str) -> tuple[dict, bytes]:
    body = json.dumps({"error": {"code": code, "message": message, "details": {}}}).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    if status == 401:
        start["headers"].append((b"www-authenticate", b'Token realm="agentkb"'))
    return start, body


def _token_user(key: str) -> str | None:
    from rest_framework.authtoken.models import Token

    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return None
    return token.user.get_username()


class McpTokenAuth:
    """ASGI middleware: the REST API's token auth (``Authorization: Token <key>``; ``Bearer`` is
    accepted too, as many MCP clients only send that) and Django's ALLOWED_HOSTS."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host, _ = split_domain_port(headers.get("host", ""))
        if not host or not validate_host(host, settings.ALLOWED_HOSTS):
            await self._refuse(send, 400, "bad_host", f"host {headers.get('host', '')!r} is not allowed")
            return
        scheme, _, key = headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() not in ("token", "bearer") or not key.strip():
            await self._refuse(
                send, 401, "not_authenticated", "Authentication credentials were not provided."
            )
            return
        username = await sync_to_async(_db_call)(_token_user, key=key.strip())
        if username is None:
            await self._refuse(send, 401, "authentication_failed", "Invalid token.")
            return
        await self.app({**scope, AGENT_SCOPE_KEY: username}, receive, send)

    @staticmethod
    async def _refuse(send, status: int, code: str, message: str) -> None:
        start, body = _json_error(status, code, message)
        await send(start)
        await send({"type": "http.response.body", "body": body})


def mcp_http_app(server: FastMCP | None = None):
    """(asgi_app, session_manager) for streamable HTTP; the caller runs ``session_manager.run()``
    for the life of the process (config.asgi does it in the ASGI lifespan)."""
    from mcp.server.fastmcp.server import StreamableHTTPASGIApp

    server = server or build_server()
    server.streamable_http_app()  # creates the session manager
    manager = server.session_manager
    return McpTokenAuth(StreamableHTTPASGIApp(manager)), manager
