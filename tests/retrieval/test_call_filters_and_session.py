"""What the agent's framework and the model each send (issue: the agent's edges): the session
comes in the ``X-Session-Id`` header, not from the model; ``domains`` narrows one call within the
agent's scope on L0 and L1; a field the tool does not take is a 400 naming it; REST takes
``Bearer`` as MCP and Dify do."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from knowledge.models import KnowledgeDomain
from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue
from retrieval.models import AgentProfile
from tests.retrieval.test_mcp_server import live_asgi  # noqa: F401 (a fixture)

LOOKUP = "/api/tools/lookup_knowledge"


def _returned(body: dict) -> list[str]:
    items = ([body["primary"]] if body["primary"] else []) + body["supplement"]
    return [item["docKey"] for item in items]


def _fields(response) -> dict:
    """The field errors of a 400 (the project's JSON error format)."""
    return response.json()["error"]["details"]


def _client(scheme: str = "Token", *, domains: list[str] | None = None) -> APIClient:
    token = tool_token_issue(name=f"edges-{uuid.uuid4().hex[:8]}")
    if domains:
        profile = AgentProfile.objects.get(user=token.user)
        profile.allowed_domains.set([KnowledgeDomain.objects.get_or_create(domain_id=d)[0] for d in domains])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {token.key}")
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "Token"])
def test_rest_takes_the_key_as_bearer_or_token(seeded_corpus, session_id, scheme):
    response = _client(scheme).post(LOOKUP, {"query": "ERR_TIMEOUT", "session_id": session_id}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["primary"]["docKey"] == "api/error-codes.md"


@pytest.mark.django_db
def test_a_wrong_bearer_key_is_a_401_in_json(seeded_corpus):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer " + "0" * 40)
    response = client.post(LOOKUP, {"query": "ERR_TIMEOUT", "session_id": "s"}, format="json")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.django_db
def test_the_session_header_keeps_the_action_memory_without_a_body_field(seeded_corpus, session_id):
    client = _client()
    first = client.post(LOOKUP, {"query": "ERR_TIMEOUT"}, format="json", HTTP_X_SESSION_ID=session_id)
    second = client.post(LOOKUP, {"query": "ERR_TIMEOUT"}, format="json", HTTP_X_SESSION_ID=session_id)
    assert first.status_code == second.status_code == 200
    assert first.json()["primary"]["docKey"] == "api/error-codes.md"
    assert second.json()["relevanceLevel"] == "DEDUPED"
    assert ToolInvocation.objects.filter(session_id=session_id).count() == 2
    # The same body field as the header is the same session; the seeds' callers still send it.
    same = client.post(
        LOOKUP,
        {"query": "ERR_TIMEOUT", "session_id": session_id},
        format="json",
        HTTP_X_SESSION_ID=session_id,
    )
    assert same.json()["relevanceLevel"] == "DEDUPED"


@pytest.mark.django_db
def test_a_body_session_differing_from_the_header_is_a_400_naming_it(seeded_corpus, session_id):
    response = _client().post(
        LOOKUP,
        {"query": "ERR_TIMEOUT", "session_id": "invented-by-the-model"},
        format="json",
        HTTP_X_SESSION_ID=session_id,
    )
    assert response.status_code == 400
    assert "X-Session-Id" in _fields(response)["session_id"][0]


@pytest.mark.django_db
def test_no_session_anywhere_is_a_400_naming_session_id(seeded_corpus):
    response = _client().post(LOOKUP, {"query": "ERR_TIMEOUT"}, format="json")
    assert response.status_code == 400
    assert "session_id" in _fields(response)


@pytest.mark.django_db
def test_an_unknown_field_is_a_400_naming_it_and_the_call_is_recorded(seeded_corpus, session_id):
    response = _client().post(
        LOOKUP, {"query": "ERR_TIMEOUT", "domain": ["payment"], "session_id": session_id}, format="json"
    )
    assert response.status_code == 400
    body = _fields(response)
    assert set(body) == {"domain"} and "Unknown field" in body["domain"][0]
    refused = ToolInvocation.objects.get(session_id=session_id)
    assert "domain" in refused.error


@pytest.mark.django_db
def test_the_domains_filter_searches_only_those_domains_on_l0_and_l1(seeded_corpus, session_id):
    client = _client()
    # L0: the exact error code lives in "api"; filtered to "payment" it is not found there.
    filtered = client.post(
        LOOKUP, {"query": "ERR_TIMEOUT", "domains": ["payment"]}, format="json", HTTP_X_SESSION_ID=session_id
    ).json()
    assert all(key.startswith("payment/") for key in _returned(filtered))
    assert "api/error-codes.md" not in _returned(filtered)
    # L1: a question about connection pools, filtered to "infrastructure", answers from there only.
    pools = client.post(
        LOOKUP,
        {"query": "数据库连接池配置", "domains": ["infrastructure"]},
        format="json",
        HTTP_X_SESSION_ID=f"{session_id}-2",
    ).json()
    assert pools["found"] is True
    assert _returned(pools) and all(key.startswith("infrastructure/") for key in _returned(pools))
    recorded = ToolInvocation.objects.filter(session_id=f"{session_id}-2").get().request
    assert recorded["domains"] == ["infrastructure"]  # as sent: a list, not its repr
    unfiltered = client.post(
        LOOKUP,
        {"query": "ERR_TIMEOUT", "domains": ["api"]},
        format="json",
        HTTP_X_SESSION_ID=f"{session_id}-3",
    ).json()
    assert unfiltered["primary"]["docKey"] == "api/error-codes.md"


@pytest.mark.django_db
@pytest.mark.parametrize("bad", [["no-such-domain"], "api-but-a-string-of-nothing", [""], [1], {}])
def test_a_bad_domains_filter_is_a_400_naming_domains(seeded_corpus, session_id, bad):
    response = _client().post(
        LOOKUP, {"query": "ERR_TIMEOUT", "domains": bad, "session_id": session_id}, format="json"
    )
    assert response.status_code == 400
    assert set(_fields(response)) == {"domains"}


@pytest.mark.django_db
def test_a_domain_outside_the_agents_scope_is_refused_like_an_unknown_one(seeded_corpus, session_id):
    scoped = _client(domains=["api"])
    outside = _fields(
        scoped.post(
            LOOKUP, {"query": "退款", "domains": ["payment"], "session_id": session_id}, format="json"
        )
    )
    unknown = _fields(
        scoped.post(LOOKUP, {"query": "退款", "domains": ["nope"], "session_id": session_id}, format="json")
    )
    assert "payment" in outside["domains"][0] and "nope" in unknown["domains"][0]
    assert outside["domains"][0].replace("payment", "X") == unknown["domains"][0].replace("nope", "X")
    inside = scoped.post(
        LOOKUP, {"query": "ERR_TIMEOUT", "domains": ["api"], "session_id": session_id}, format="json"
    ).json()
    assert inside["primary"]["docKey"] == "api/error-codes.md"


@pytest.mark.django_db(transaction=True)
def test_over_mcp_the_domains_filter_applies_and_an_unknown_argument_is_named(corpus, live_asgi):  # noqa: F811
    import asyncio
    import json

    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.retrieval.conftest import seed_documents

    seed_documents(corpus)
    token = tool_token_issue(name=f"mcp-edges-{uuid.uuid4().hex[:6]}")

    async def calls():
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {token.key}"}, timeout=30) as http,
            streamable_http_client(live_asgi.mcp_url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            filtered = await session.call_tool(
                "lookup_knowledge", {"query": "ERR_TIMEOUT", "domains": ["payment"]}
            )
            typo = await session.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT", "domain": ["api"]})
            refused = await session.call_tool(
                "lookup_knowledge", {"query": "ERR_TIMEOUT", "domains": ["nope"]}
            )
            return tools, filtered, typo, refused

    tools, filtered, typo, refused = asyncio.run(calls())
    assert "session_id" not in tools["lookup_knowledge"].inputSchema["properties"]
    body = json.loads(filtered.content[0].text)
    assert "api/error-codes.md" not in _returned(body)
    assert typo.isError and "domain: not an argument it takes" in typo.content[0].text
    assert (
        refused.isError and "domains: Not a domain this agent can search: 'nope'" in refused.content[0].text
    )
