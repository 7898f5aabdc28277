"""Refuse an agent this process has just refused, before Django (ASGI only).

Under the production command (uvicorn workers over ``config.asgi``) the synchronous pieces of
Django requests run on a few threads per worker (``config/asgi_lanes.py``): a flooding agent's
requests, refused or not, would take those threads in turn with every other agent's lookups. The MCP endpoint already refuses a key in
``retrieval.agents.throttling.refused_keys`` on the event loop; this does the same for the REST
API, so an agent past its budget costs the others a dictionary lookup per request, not a place
in the queue. The answer is REST's own 429 (``throttled``, ``Retry-After``); the refusal is
counted as DRF's would be. Dify's endpoint keeps its own error format and is left to Django.
"""

from __future__ import annotations

from retrieval.agents.throttling import refused_keys
from retrieval.agents.tokens import AUTH_SCHEMES, token_digest
from retrieval.entrypoints.mcp_responses import refuse_throttled

API_PREFIX = "/api/"
DIFY_PREFIX = "/api/dify/"


def refused_wait(scope: dict) -> float | None:
    """Seconds the agent presenting this request's key is still refused for, or None (not an
    agent API request, no key, or a key not refused here)."""
    path = scope.get("path", "")
    if not path.startswith(API_PREFIX) or path.startswith(DIFY_PREFIX):
        return None
    header = next((value for name, value in scope.get("headers", []) if name == b"authorization"), b"")
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() not in AUTH_SCHEMES:
        return None
    try:
        key = parts[1].decode()
    except UnicodeError:
        return None
    return refused_keys.wait(token_digest(key))


async def refuse_if_refused(scope: dict, send) -> bool:
    """Answer 429 and return True when this request's agent is still refused."""
    wait = refused_wait(scope)
    if wait is None:
        return False
    await refuse_throttled(send, wait)
    return True
