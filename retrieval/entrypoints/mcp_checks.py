"""What a request to MCP's ``/mcp`` must be before the MCP library sees it (checked by the guard,
``retrieval.entrypoints.mcp_http``): from an allowed origin, and a body the library can parse and
will not answer with its own pydantic report.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.http import is_same_domain

# Nesting refused before the MCP library parses a body (``json_body_check``).
MAX_JSON_DEPTH = 64


def request_scheme(scope, headers: dict[str, str]) -> str:
    """The scheme the client used, as Django's ``request.scheme`` reads it: SECURE_PROXY_SSL_HEADER
    (behind a TLS proxy) first, then the server's own."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, secure = proxy
        value = headers.get(name.removeprefix("HTTP_").replace("_", "-").lower())
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure else "http"
    return scope.get("scheme", "http")


def origin_allowed(origin: str, *, scheme: str, host: str) -> bool:
    """An Origin header's value, by Django's CSRF rule (the one admin forms pass): this server's
    own origin (the scheme and the ``Host`` it was reached on, port included: ``host`` is already
    one of ALLOWED_HOSTS), an exact CSRF_TRUSTED_ORIGINS entry, or one of its ``scheme://*.domain``
    entries (the port, if any, included). ``http://localhost:9999`` is refused by a server reached
    on ``localhost:8000``: another port is another origin, often another local program."""
    if origin == f"{scheme}://{host}":
        return True
    trusted = getattr(settings, "CSRF_TRUSTED_ORIGINS", [])
    if origin in trusted:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return any(
        parts.scheme == entry.scheme and is_same_domain(parts.netloc, entry.netloc.lstrip("*"))
        for entry in (urlsplit(t) for t in trusted if "*" in t)
    )


# Steps of JSON nesting: an opening bracket one level down, a closing one up. Strings are taken
# out first, so brackets inside them do not count.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def json_depth(body: bytes) -> int:
    """How deeply a UTF-8 JSON body nests, counted without parsing it (so without recursion)."""
    steps = _JSON_STRING.sub(b"", body).translate(None, _NOT_A_BRACKET).translate(_BRACKET_STEPS)
    return max(accumulate(memoryview(steps).cast("b")), default=0)


def json_body_check(body: bytes) -> tuple[tuple[str, str] | None, Any]:
    """(why a POST body must not reach the MCP library, as (error code, message), or None; the
    parsed message, or None).

    The library parses with Python's recursive ``json`` and answers a body nested past the
    recursion limit with a 500 (also on a session-opening request): nesting is checked first,
    without parsing, and refused as REST's parser refuses it (``parse_error``; JSON-RPC messages
    nest a few levels). A message that is JSON but not JSON-RPC would get the library's pydantic
    report ("4 validation errors for JSONRPCMessage ...", the input echoed, pydantic's links): it
    is refused here naming the field (``invalid_message``). A body that is not JSON is the
    library's to answer (its "Parse error" names the position)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return ("parse_error", "body: JSON parse error - the body is not UTF-8"), None
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH and json_depth(body) > MAX_JSON_DEPTH:
        return (
            "parse_error",
            f"body: JSON parse error - nested too deeply (more than {MAX_JSON_DEPTH} levels)",
        ), None
    try:
        message = json.loads(body)
    except ValueError:
        return None, None
    problem = jsonrpc_problem(message)
    return (None if problem is None else ("invalid_message", problem)), message


def _is_id(value) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def jsonrpc_problem(message) -> str | None:
    """What keeps ``message`` from being one JSON-RPC 2.0 request, notification or response (the
    shapes the library accepts; MCP 2025-06-18 has no batches), naming the field; or None."""
    if not isinstance(message, dict):
        return "body: one JSON-RPC message (a JSON object) is required; batches are not accepted"
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc: must be "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return "method: a string is required"
        if "id" in message and not _is_id(message["id"]):
            return "id: a string or an integer is required"
        if message.get("params") is not None and not isinstance(message["params"], dict):
            return "params: an object is required"
        return None
    if "result" not in message and "error" not in message:
        return "method: a string is required"
    if not _is_id(message.get("id")):
        return "id: a string or an integer is required"
    if "result" in message:
        return None if isinstance(message["result"], dict) else "result: an object is required"
    error = message["error"]
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and isinstance(error.get("message"), str):
        return None
    return "error: an object with an integer code and a string message is required"
