"""The guard in front of MCP's streamable HTTP transport (``/mcp``): who may talk, from where,
how often, how much, and with how many open sessions.

In order, for every request:
1. ``Host`` must be one of Django's ALLOWED_HOSTS (400 ``bad_host``);
2. an ``Origin`` header, when sent (browsers always send it), must be this server's own origin
   (scheme, host and port) or one of CSRF_TRUSTED_ORIGINS, by Django's CSRF rule (403
   ``bad_origin``): the MCP specification requires servers to check it, against DNS-rebinding
   pages and other local programs driving a local server;
3. the tool token (``Authorization: Token <key>``, or ``Bearer``), looked up as the REST API
   looks it up (401); a key that fails spends one of the client address's failed keys
   (API_THROTTLE_FAILED_AUTH), past which the answer is 429 ``throttled``;
4. every request, whatever its JSON-RPC method (``initialize``, ``tools/list``, ``tools/call``,
   ``prompts/get``, notifications, the GET stream, DELETE), spends one call of the agent's budget,
   the one REST spends (``retrieval.agents.throttling``): 429 ``throttled`` with ``Retry-After``;
5. a POST body is read whole before the MCP library sees it: over DATA_UPLOAD_MAX_MEMORY_SIZE
   413 ``request_too_large``; not UTF-8 or nested deeper than ``mcp_checks.MAX_JSON_DEPTH`` 400 ``parse_error``;
   JSON but not one JSON-RPC message 400 ``invalid_message`` naming the field;
6. the session (``mcp_sessions``, shared by every worker): a POST without ``Mcp-Session-Id``
   opens one (429 ``too_many_sessions`` when the agent already holds MCP_MAX_SESSIONS_PER_AGENT
   open ones, so one agent cannot lock everyone out) and the answer carries its id; a request
   with an id must come with the token that opened it, else it is answered exactly as an unknown
   or expired id (404 "Session not found", the SDK's own body); DELETE closes it.

The SDK runs its streamable HTTP transport statelessly (a fresh transport per request): nothing a
session needs is kept in one worker's memory, so ``/mcp/`` is served by every web worker.
"""

from __future__ import annotations

import hashlib

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from retrieval.agents.identity import Agent, agent_for_user
from retrieval.agents.throttling import agent_budget_spend, failed_auth_spend, refused_keys
from retrieval.agents.tokens import token_digest, token_user
from retrieval.entrypoints.mcp_checks import json_body_check, origin_allowed, request_scheme
from retrieval.entrypoints.mcp_responses import refuse as _refuse
from retrieval.entrypoints.mcp_responses import refuse_throttled as _refuse_throttled
from retrieval.entrypoints.mcp_session_gate import session_serve

AGENT_SCOPE_KEY = "agentkb.agent"  # the calling Agent, set in the ASGI scope for the tools


def db_call(fn, /, **kwargs):
    """Run ``fn`` like a Django request (MCP's handlers run outside Django's request cycle): stale
    database connections closed before and after. Every MCP handler that reads the database
    goes through it."""
    close_old_connections()
    try:
        return fn(**kwargs)
    finally:
        close_old_connections()


def _token_agent(key: str) -> Agent | None:
    user = token_user(key)
    return None if user is None else agent_for_user(user)


def _principal(agent: Agent, key: str) -> AuthenticatedUser:
    """What the SDK binds a session to: the agent and (as ``subject``) the token, hashed so no key
    is kept in memory longer than the request."""
    token_hash = hashlib.sha256(key.encode()).hexdigest()[:32]
    return AuthenticatedUser(
        AccessToken(token=token_hash, client_id=f"agent-{agent.id}", scopes=[], subject=token_hash)
    )


class McpTokenAuth:
    """ASGI middleware in front of the SDK's streamable HTTP app (see the module docstring)."""

    def __init__(self, app, manager=None):
        self.app = app
        self.manager = manager

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host, _ = split_domain_port(headers.get("host", ""))
        if not host or not validate_host(host, settings.ALLOWED_HOSTS):
            await _refuse(send, 400, "bad_host", f"host {headers.get('host', '')[:200]!r} is not allowed")
            return
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(
            origin, scheme=request_scheme(scope, headers), host=headers["host"]
        ):
            await _refuse(
                send,
                403,
                "bad_origin",
                f"origin {origin[:200]!r} is not allowed (CSRF_TRUSTED_ORIGINS, or this server's own "
                "scheme, host and port)",
            )
            return
        scheme, _, key = headers.get("authorization", "").strip().partition(" ")
        key = key.strip()
        if scheme.lower() not in ("token", "bearer") or not key:
            await _refuse(send, 401, "not_authenticated", "Authentication credentials were not provided.")
            return
        # An agent this process just refused is refused again before the database is asked.
        digest = token_digest(key)
        wait = refused_keys.wait(digest)
        if wait is not None:
            await _refuse_throttled(send, wait)
            return
        agent = await sync_to_async(db_call)(_token_agent, key=key)
        if agent is None:
            client = scope.get("client")
            wait = await sync_to_async(failed_auth_spend)(client[0] if client else None)
            if wait is not None:
                await _refuse_throttled(send, wait)
                return
            await _refuse(send, 401, "authentication_failed", "Invalid token.")
            return
        # Every request spends one call, whatever its method (initialize, tools/list, a stream,
        # a DELETE): the agent's own budget, the one REST spends.
        wait = await sync_to_async(agent_budget_spend)(agent.budget_id)
        if wait is not None:
            refused_keys.remember(digest, wait)
            await _refuse_throttled(send, wait)
            return

        if scope.get("method") == "POST":
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 10 * 1024 * 1024
            body, complete = await _read_body(receive, limit=limit)
            if not complete:
                await _refuse(
                    send,
                    413,
                    "request_too_large",
                    f"body: the request body is larger than {limit:,} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE).",
                )
                return
            # A large body takes tens of milliseconds to scan and parse: off the event loop.
            if len(body) > 64 * 1024:
                problem, _ = await sync_to_async(json_body_check, thread_sensitive=False)(body)
            else:
                problem, _ = json_body_check(body)
            if problem is not None:
                await _refuse(send, 400, *problem)
                return
            receive = _replay(body, receive)

        principal = _principal(agent, key)
        scope = {**scope, AGENT_SCOPE_KEY: agent, "user": principal}
        await session_serve(
            self.app, scope, receive, send, agent=agent, subject=principal.access_token.subject
        )


async def _read_body(receive, *, limit: int) -> tuple[bytes, bool]:
    """The whole request body, or (what was read, False) once it exceeds ``limit`` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), True
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", False
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True


def _replay(body: bytes, receive):
    """A ``receive`` that hands the already-read body to the app once, then waits on the client
    (so a disconnect still reaches the app)."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
