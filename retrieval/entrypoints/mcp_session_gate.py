"""The session step of ``/mcp`` (``mcp_http.McpTokenAuth`` step 6), over the registry every
worker shares (``mcp_sessions``): open, check the owner, close; the request then goes to the
SDK's stateless transport with the session id in its headers, so the tools key the action
memory by it (``mcp_server.mcp_session_id``) on whichever worker serves them."""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async
from django.conf import settings

from retrieval.agents.identity import Agent
from retrieval.entrypoints.mcp_responses import refuse, refuse_unknown_session
from retrieval.entrypoints.mcp_sessions import Owner, session_registry

logger = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"
# Retry-After of a refused session: idle sessions close by themselves (MCP_SESSION_IDLE_S).
SESSION_RETRY_AFTER_S = 60


async def session_serve(app, scope, receive, send, *, agent: Agent, subject: str) -> None:
    """Serve one authenticated, checked request with its session (see the module docstring)."""
    owner = Owner(agent.id, subject)
    registry = session_registry()
    session_id = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == SESSION_HEADER), None)
    try:
        if session_id is None:
            if scope.get("method") != "POST":
                await refuse(
                    send, 400, "missing_session", "Mcp-Session-Id: a GET or DELETE needs a session's id"
                )
                return
            cap = settings.MCP_MAX_SESSIONS_PER_AGENT or 0
            session_id = await sync_to_async(registry.open, thread_sensitive=False)(owner, cap)
            if session_id is None:
                await refuse(
                    send,
                    429,
                    "too_many_sessions",
                    f"This agent already has {cap} open MCP sessions (MCP_MAX_SESSIONS_PER_AGENT): "
                    "close one (HTTP DELETE with its Mcp-Session-Id) or wait for an idle one to expire.",
                    retry_after=SESSION_RETRY_AFTER_S,
                )
                return
            scope = {**scope, "headers": [*scope.get("headers", []), (SESSION_HEADER, session_id.encode())]}
            send = _with_session_header(send, session_id)
        else:
            found = await sync_to_async(registry.owner, thread_sensitive=False)(session_id[:128])
            if found != owner:
                if found is not None:
                    logger.warning(
                        "MCP session %s presented by a token that did not open it", session_id[:64]
                    )
                await refuse_unknown_session(send)
                return
            if scope.get("method") == "DELETE":
                await sync_to_async(registry.close, thread_sensitive=False)(session_id, owner)
                await send(
                    {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]}
                )
                await send({"type": "http.response.body", "body": b""})
                return
    except Exception:  # Redis down: say so rather than serve a session nobody can check
        logger.exception("MCP session registry unavailable")
        await refuse(send, 503, "sessions_unavailable", "MCP sessions are unavailable; try again later.")
        return
    await app(scope, receive, send)


def _with_session_header(send, session_id: str):
    """``send`` adding the new session's id to the response, as the SDK does for a session it opens."""

    async def sending(message):
        if message["type"] == "http.response.start":
            message = {
                **message,
                "headers": [*message.get("headers", []), (SESSION_HEADER, session_id.encode())],
            }
        await send(message)

    return sending
