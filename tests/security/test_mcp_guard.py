"""MCP's streamable HTTP transport (config.asgi under a real uvicorn) against a hostile agent:
every request spends its budget, whatever the JSON-RPC method; wrong keys are counted per
address; bodies the MCP library would choke on never reach it; origins are compared whole;
error texts name the field, never an internal function.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from retrieval.agents.tokens import tool_token_issue
from tests.retrieval.test_mcp_server import LiveAsgi

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
BAD_KEY = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def live_asgi():
    with LiveAsgi() as server:
        yield server


@pytest.fixture
def key(db) -> str:
    return tool_token_issue(name=f"mcp-{uuid.uuid4().hex[:8]}").key


def _rates(settings, **rates: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **rates},
    }


def _post(url: str, key: str, payload=None, *, content: bytes | None = None, **headers) -> httpx.Response:
    return httpx.post(
        url,
        json=payload if content is None else None,
        content=content,
        headers={**ACCEPT, "Authorization": f"Token {key}", **headers},
        timeout=30,
    )


def _session(url: str, key: str) -> str:
    opened = _post(url, key, INITIALIZE)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _post(url, key, note, **{"Mcp-Session-Id": session}).status_code == 202
    return session


# --- every request spends ---------------------------------------------------------------------------
def test_a_tools_list_flood_spends_the_budget_like_tool_calls(live_asgi, key, settings):
    # Given an agent with 10 calls a minute and an open session (2 requests spent)
    _rates(settings, tool="10/min")
    url = live_asgi.mcp_url
    session = _session(url, key)

    # When it floods tools/list
    statuses = [
        _post(url, key, {"jsonrpc": "2.0", "id": i, "method": "tools/list"}, **{"Mcp-Session-Id": session})
        for i in range(12)
    ]

    # Then 8 are answered and the rest refused with 429, Retry-After and the guard's error format
    assert [r.status_code for r in statuses] == [200] * 8 + [429] * 4
    refused = statuses[-1].json()["error"]
    assert refused["code"] == "throttled" and refused["details"]["retry_after_seconds"] >= 1
    assert int(statuses[-1].headers["retry-after"]) >= 1
    # And opening another session, or pinging, is refused too: nothing is free
    assert _post(url, key, INITIALIZE).status_code == 429
    ping = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
    assert _post(url, key, ping, **{"Mcp-Session-Id": session}).status_code == 429
    # And REST is refused: one budget
    rest = httpx.get(
        f"http://127.0.0.1:{live_asgi.port}/api/prompts/executor",
        headers={"Authorization": f"Token {key}"},
        timeout=30,
    )
    assert rest.status_code == 429


def test_wrong_keys_over_mcp_are_refused_with_429_past_the_address_budget(live_asgi, key, settings):
    # Given 3 failed keys a minute per address, and a guesser on a loopback address of its own
    _rates(settings, failed_auth="3/min")
    address = f"127.{uuid.uuid4().int % 250 + 1}.{uuid.uuid4().int % 250 + 1}.{uuid.uuid4().int % 250 + 1}"
    with httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30) as guesser:

        def open_with(presented: str) -> httpx.Response:
            headers = {**ACCEPT, "Authorization": f"Token {presented}"}
            return guesser.post(live_asgi.mcp_url, json=INITIALIZE, headers=headers)

        # When a wrong key is presented five times
        statuses = [open_with(BAD_KEY) for _ in range(5)]
        # Then three 401s, then 429 with Retry-After
        assert [r.status_code for r in statuses] == [401, 401, 401, 429, 429]
        assert statuses[0].json()["error"]["code"] == "authentication_failed"
        assert statuses[-1].json()["error"]["code"] == "throttled"
        assert int(statuses[-1].headers["retry-after"]) >= 1
        # And a valid key from the same address still opens a session
        assert open_with(key).status_code == 200
