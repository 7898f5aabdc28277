"""MCP's streamable HTTP transport (config.asgi under a real uvicorn) against a hostile agent:
every request spends its budget, whatever the JSON-RPC method; wrong keys are counted per
address; bodies the MCP library would choke on never reach it; origins are compared whole;
error texts name the field, never an internal function.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from retrieval.agents.tokens import tool_token_issue
from tests.retrieval.test_mcp_server import LiveAsgi
from tests.support.mcp_http import ACCEPT, INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)

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


# --- bodies the MCP library never sees ---------------------------------------------------------------
@pytest.mark.parametrize("opening", [False, True], ids=["in-a-session", "opening-a-session"])
def test_a_body_nested_100000_deep_is_a_400_naming_the_nesting_not_a_500(live_asgi, key, opening):
    url = live_asgi.mcp_url
    session = None if opening else _session(url, key)
    deep = b"[" * 100_000 + b"]" * 100_000
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":' + deep + b"}}"
        if opening
        else b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lookup_knowledge",'
        b'"arguments":{"query":' + deep + b"}}}"
    )
    headers = {} if opening else {"Mcp-Session-Id": session}
    response = _post(url, key, content=body, **headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "parse_error" and "nested too deeply" in error["message"]
    assert error["message"].startswith("body: ")
    # The agent goes on as before: its session answers, or a session opens
    if opening:
        assert _post(url, key, INITIALIZE).status_code == 200
    else:
        listed = _post(
            url, key, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, **{"Mcp-Session-Id": session}
        )
        assert listed.status_code == 200 and "lookup_knowledge" in listed.text


def test_shallow_json_with_brackets_inside_strings_is_not_refused(live_asgi, key):
    url = live_asgi.mcp_url
    session = _session(url, key)
    call = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "get_knowledge_map", "arguments": {}, "_meta": {"note": "[" * 500 + "{" * 500}},
    }
    assert _post(url, key, call, **{"Mcp-Session-Id": session}).status_code == 200


def test_a_body_over_the_upload_limit_is_a_413_naming_the_body(live_asgi, key, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = _post(
        live_asgi.mcp_url,
        key,
        content=b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"q":"' + b"x" * 20_000 + b'"}}',
    )
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "request_too_large" and error["message"].startswith("body: ")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"jsonrpc":"2.0","id":1}', "method"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":5}', "params"),
        (b'{"jsonrpc":"2.0","id":[1],"method":"tools/list"}', "id"),
        (b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}', "jsonrpc"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', "body"),
        (b'\xff\xfe{"jsonrpc":"2.0"}', "body"),
    ],
)
def test_a_message_that_is_not_json_rpc_is_refused_naming_the_field(live_asgi, key, body, field):
    session = _session(live_asgi.mcp_url, key)
    response = _post(live_asgi.mcp_url, key, content=body, **{"Mcp-Session-Id": session})
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith(f"{field}: ")
    for internal in ("JSONRPCMessage", "pydantic", "validation error for", "input_value"):
        assert internal not in message


# --- origins, whole ----------------------------------------------------------------------------------
def test_an_origin_must_match_scheme_host_and_port(live_asgi, key, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://agents.example.com", "https://*.tools.example.com:8443"]
    port = live_asgi.port

    def opened(origin: str, host: str = f"localhost:{port}") -> int:
        return _post(live_asgi.mcp_url, key, INITIALIZE, Origin=origin, Host=host).status_code

    # This server's own origin, as the browser sees it: scheme, host and the port it reached
    assert opened(f"http://localhost:{port}") == 200
    assert opened(f"http://127.0.0.1:{port}", host=f"127.0.0.1:{port}") == 200
    # Another port of an allowed host is another origin (another local program): refused
    refused = _post(
        live_asgi.mcp_url, key, INITIALIZE, Origin="http://localhost:9999", Host=f"localhost:{port}"
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "bad_origin"
    assert opened("http://localhost") == 403
    assert opened(f"https://localhost:{port}") == 403  # another scheme
    assert opened(f"http://127.0.0.1:{port}") == 403  # reached as localhost: another host
    # CSRF_TRUSTED_ORIGINS: exactly, or its subdomains on the entry's port
    assert opened("https://agents.example.com") == 200
    assert opened("https://agents.example.com:444") == 403
    assert opened("https://a.tools.example.com:8443") == 200
    assert opened("https://a.tools.example.com") == 403
    assert opened("null") == 403


# --- error texts -------------------------------------------------------------------------------------
INTERNALS = ("build_server", "<locals>", "Arguments", "pydantic", "validation error for", "input_value")


@pytest.mark.parametrize(
    ("request_body", "field"),
    [
        (
            {"method": "prompts/get", "params": {"name": "planner", "arguments": {"verbose": "yes"}}},
            "verbose",
        ),
        ({"method": "prompts/get", "params": {"name": "executor", "arguments": {"x": "y"}}}, "x"),
        (
            {"method": "tools/call", "params": {"name": "lookup_knowledge", "arguments": {"query": 5}}},
            "query",
        ),
        ({"method": "tools/call", "params": {"name": "lookup_knowledge", "arguments": {}}}, "query"),
        (
            {
                "method": "tools/call",
                "params": {"name": "lookup_knowledge", "arguments": {"query": "q", "top_k": "many"}},
            },
            "top_k",
        ),
        (
            {
                "method": "tools/call",
                "params": {"name": "lookup_knowledge", "arguments": {"query": "q", "session_id": "s" * 500}},
            },
            "session_id",
        ),
    ],
)
def test_errors_name_the_argument_and_never_an_internal_function(
    live_asgi, key, request_body, field, vector_store
):
    session = _session(live_asgi.mcp_url, key)
    response = _post(
        live_asgi.mcp_url, key, {"jsonrpc": "2.0", "id": 7, **request_body}, **{"Mcp-Session-Id": session}
    )
    assert response.status_code == 200
    data = next(line for line in response.text.splitlines() if line.startswith("data: "))
    message = json.loads(data.removeprefix("data: "))
    text = message["error"]["message"] if "error" in message else message["result"]["content"][0]["text"]
    assert f"{field}: " in text, text
    for internal in INTERNALS:
        assert internal not in text, text


def test_an_unknown_tool_or_prompt_is_quoted_short(live_asgi, key):
    session = _session(live_asgi.mcp_url, key)
    name = "x" * 5000
    for method in ("tools/call", "prompts/get"):
        response = _post(
            live_asgi.mcp_url,
            key,
            {"jsonrpc": "2.0", "id": 8, "method": method, "params": {"name": name, "arguments": {}}},
            **{"Mcp-Session-Id": session},
        )
        assert response.status_code == 200
        assert "unknown" in response.text and len(response.text) < 400, response.text[:500]


# --- ids of requests in flight ------------------------------------------------------------------------
def test_a_second_request_with_the_id_of_one_in_flight_is_refused_not_left_hanging(
    live_asgi, key, vector_store
):
    # Given a session with a slow request in flight (a lookup: it embeds and searches) ...
    import threading

    url = live_asgi.mcp_url
    session = _session(url, key)
    lookup = {
        "jsonrpc": "2.0",
        "id": 42,
        "method": "tools/call",
        "params": {"name": "lookup_knowledge", "arguments": {"query": "ERR_TIMEOUT", "session_id": "s-1"}},
    }
    answers: list[httpx.Response] = []
    first = threading.Thread(
        target=lambda: answers.append(_post(url, key, lookup, **{"Mcp-Session-Id": session}))
    )
    # When the agent sends many requests with the same id at once
    others = [
        threading.Thread(
            target=lambda: answers.append(
                _post(
                    url,
                    key,
                    {"jsonrpc": "2.0", "id": 42, "method": "tools/list"},
                    **{"Mcp-Session-Id": session},
                )
            )
        )
        for _ in range(6)
    ]
    for thread in [first, *others]:
        thread.start()
    for thread in [first, *others]:
        thread.join(timeout=60)
    # Then every request is answered (none hangs): each 200, or 409 naming the id
    assert len(answers) == 7
    assert {r.status_code for r in answers} <= {200, 409}
    refused = [r for r in answers if r.status_code == 409]
    assert all(
        r.json()["error"]["code"] == "id_in_use" and r.json()["error"]["message"].startswith("id: ")
        for r in refused
    )
    # And the session goes on
    listed = _post(
        url, key, {"jsonrpc": "2.0", "id": 43, "method": "tools/list"}, **{"Mcp-Session-Id": session}
    )
    assert listed.status_code == 200
