"""Two agents over MCP's streamable HTTP transport (config.asgi under a real uvicorn), an honest
one and a hostile one: sessions bound to the token that opened them, the shared throttle
budget, the per-agent session cap, the Origin check and domain scopes. The SDK's own client
drives the honest agent; the hostile one also sends raw requests, as an attacker would.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from knowledge.models import KnowledgeDomain
from retrieval.agents.tokens import tool_token_issue
from retrieval.models import AgentProfile
from tests.retrieval.conftest import seed_documents
from tests.retrieval.test_mcp_server import LiveAsgi
from tests.support.mcp_http import ACCEPT, INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)


def _call(name: str, arguments: dict, id_: int = 2) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@pytest.fixture
def live_asgi():
    with LiveAsgi() as server:
        yield server


@pytest.fixture
def tokens(db):
    return (
        tool_token_issue(name=f"honest-{uuid.uuid4().hex[:6]}"),
        tool_token_issue(name=f"hostile-{uuid.uuid4().hex[:6]}"),
    )


def _headers(token, **extra) -> dict:
    return {**ACCEPT, "Authorization": f"Token {token.key}", **extra}


def _open(url: str, token, **extra) -> httpx.Response:
    return httpx.post(url, json=INITIALIZE, headers=_headers(token, **extra), timeout=15)


def _initialized(url: str, token, session: str) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = httpx.post(url, json=note, headers=_headers(token, **{"Mcp-Session-Id": session}), timeout=15)
    assert response.status_code == 202, response.text


def _session(url: str, token) -> str:
    response = _open(url, token)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    _initialized(url, token, session)
    return session


def test_another_token_presenting_a_session_id_gets_the_unknown_session_answer(corpus, live_asgi, tokens):
    seed_documents(corpus)
    honest, hostile = tokens
    url = live_asgi.mcp_url
    session = _session(url, honest)

    stolen = httpx.post(
        url,
        json=_call("lookup_knowledge", {"query": "ERR_TIMEOUT"}),
        headers=_headers(hostile, **{"Mcp-Session-Id": session}),
        timeout=15,
    )
    unknown = httpx.post(
        url,
        json=_call("lookup_knowledge", {"query": "ERR_TIMEOUT"}),
        headers=_headers(hostile, **{"Mcp-Session-Id": uuid.uuid4().hex}),
        timeout=15,
    )
    assert stolen.status_code == unknown.status_code == 404
    assert stolen.json() == unknown.json()
    # Nor can it end the session.
    deleted = httpx.delete(url, headers=_headers(hostile, **{"Mcp-Session-Id": session}), timeout=15)
    assert deleted.status_code == 404

    # The owner's session still works.
    own = httpx.post(
        url,
        json=_call("lookup_knowledge", {"query": "ERR_TIMEOUT"}),
        headers=_headers(honest, **{"Mcp-Session-Id": session}),
        timeout=30,
    )
    assert own.status_code == 200 and "api/error-codes.md" in own.text


def test_mcp_requests_spend_the_rest_budget_and_the_429_says_when(corpus, live_asgi, tokens, settings):
    seed_documents(corpus)
    honest, hostile = tokens
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"tool": "6/min"}}
    base = f"http://127.0.0.1:{live_asgi.port}"
    rest = httpx.post(
        f"{base}/api/tools/lookup_knowledge",
        json={"query": "ERR_TIMEOUT", "session_id": "s"},
        headers={"Authorization": f"Token {honest.key}"},
        timeout=30,
    )
    assert rest.status_code == 200
    # Opening a session spends too: initialize and notifications/initialized are requests.
    session = _session(live_asgi.mcp_url, honest)
    statuses = []
    for i in range(4):
        response = httpx.post(
            live_asgi.mcp_url,
            json=_call("get_knowledge_map", {}, id_=10 + i),
            headers=_headers(honest, **{"Mcp-Session-Id": session}),
            timeout=30,
        )
        statuses.append(response.status_code)
    assert statuses == [200, 200, 200, 429]
    assert int(response.headers["retry-after"]) >= 1
    assert response.json()["error"]["code"] == "throttled"
    # REST is refused too: one budget. The other agent is not.
    again = httpx.get(
        f"{base}/api/knowledge-map", headers={"Authorization": f"Token {honest.key}"}, timeout=15
    )
    assert again.status_code == 429 and int(again.headers["retry-after"]) >= 1
    other = httpx.get(
        f"{base}/api/knowledge-map", headers={"Authorization": f"Token {hostile.key}"}, timeout=15
    )
    assert other.status_code == 200


def test_one_agent_cannot_hold_more_than_its_share_of_sessions(live_asgi, tokens, settings):
    honest, hostile = tokens
    settings.MCP_MAX_SESSIONS_PER_AGENT = 2
    url = live_asgi.mcp_url
    opened = [_session(url, hostile) for _ in range(2)]
    refused = _open(url, hostile)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_sessions"
    assert "MCP_MAX_SESSIONS_PER_AGENT" in refused.json()["error"]["message"]
    assert int(refused.headers["retry-after"]) >= 1
    # Everyone else can still open sessions.
    assert _open(url, honest).status_code == 200
    # Closing one frees a place.
    closed = httpx.delete(url, headers=_headers(hostile, **{"Mcp-Session-Id": opened[0]}), timeout=15)
    assert closed.status_code == 200
    assert _open(url, hostile).status_code == 200


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://evil.example", False),
        ("null", False),
        ("http://127.0.0.1:{port}", True),  # this server's own origin
        ("http://127.0.0.1", False),  # another port (80): another origin
        ("http://localhost:8000", False),  # an allowed host, but not the port this server is on
        ("https://agents.example.com", True),  # a CSRF_TRUSTED_ORIGINS entry
    ],
)
def test_the_origin_header_is_checked(live_asgi, tokens, settings, origin, allowed):
    settings.CSRF_TRUSTED_ORIGINS = ["https://agents.example.com"]
    response = _open(live_asgi.mcp_url, tokens[0], Origin=origin.format(port=live_asgi.port))
    if allowed:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "bad_origin"
    # No Origin (a non-browser client) is fine.
    assert _open(live_asgi.mcp_url, tokens[0]).status_code == 200


def test_over_the_sdk_client_sessions_and_scopes_are_the_agents_own(corpus, live_asgi, tokens):
    seed_documents(corpus)
    for domain in ("infrastructure", "api", "troubleshooting", "payment"):
        KnowledgeDomain.objects.get_or_create(domain_id=domain)
    honest, hostile = tokens
    AgentProfile.objects.get(user=honest.user).allowed_domains.set(
        [KnowledgeDomain.objects.get(domain_id="api")]
    )
    shared = f"conv-42-{uuid.uuid4().hex[:6]}"

    async def run(token, calls):
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {token.key}"}, timeout=30) as http,
            streamable_http_client(live_asgi.mcp_url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            results = []
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                assert not result.isError, result.content
                results.append(json.loads(result.content[0].text))
            planner = await session.get_prompt("planner")
            return results, planner.messages[0].content.text

    # The hostile agent retrieves in "conv-42" first: the honest agent's conv-42 is not touched.
    (poison,), _ = asyncio.run(
        run(hostile, [("lookup_knowledge", {"query": "ERR_TIMEOUT", "session_id": shared})])
    )
    assert poison["primary"]["docKey"] == "api/error-codes.md"
    (mine, outside, knowledge_map), planner = asyncio.run(
        run(
            honest,
            [
                ("lookup_knowledge", {"query": "ERR_TIMEOUT", "session_id": shared}),
                ("lookup_knowledge", {"query": "数据库连接池配置", "session_id": shared}),
                ("get_knowledge_map", {}),
            ],
        )
    )
    assert mine["found"] is True and mine["relevanceLevel"] != "DEDUPED"
    assert outside["found"] is False and "infrastructure" not in json.dumps(outside, ensure_ascii=False)
    assert [d["domain_id"] for d in knowledge_map["available_knowledge_domains"]] == ["api"]
    assert "infrastructure" not in planner and "payment" not in planner
