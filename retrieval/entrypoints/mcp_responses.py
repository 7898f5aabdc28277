"""The JSON answers ``/mcp`` gives before the MCP library sees a request (REST's error shape:
``{"error": {"code", "message", "details"}}``), and the SDK's own "Session not found"."""

from __future__ import annotations

import json
import math


def json_error(
    status: int, code: str, message: str, *, retry_after: int | None = None, details: dict | None = None
) -> tuple[dict, bytes]:
    body = json.dumps({"error": {"code": code, "message": message, "details": details or {}}}).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    if status == 401:
        start["headers"].append((b"www-authenticate", b'Token realm="agentkb"'))
    if retry_after is not None:
        start["headers"].append((b"retry-after", str(max(1, retry_after)).encode()))
    return start, body


async def refuse_throttled(send, wait: float) -> None:
    await refuse(
        send,
        429,
        "throttled",
        f"Request was throttled. Expected available in {math.ceil(wait)} seconds.",
        retry_after=math.ceil(wait),
        details={"retry_after_seconds": math.ceil(wait)},
    )


async def refuse(send, status: int, code: str, message: str, **extra) -> None:
    start, body = json_error(status, code, message, **extra)
    await send(start)
    await send({"type": "http.response.body", "body": body})


SESSION_NOT_FOUND = json.dumps(
    {"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": "Session not found"}},
    separators=(",", ":"),
).encode()


async def refuse_unknown_session(send) -> None:
    """What the SDK answers an unknown or expired session id, word for word: a request presenting
    another token's session learns nothing more than that."""
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(SESSION_NOT_FOUND)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": SESSION_NOT_FOUND})
