"""Two agents on one agentkb, an honest one (A) and a hostile one (B), against the real REST and
Dify endpoints: B must not read, clear, poison or starve A's sessions, judge A's calls, spend
A's budget, or see a domain A's scope hides; every probe of issue 12 that used to succeed.

Runs on the embedded default and on MariaDB + Redis (service-backed run: the action memory is
then Redis and the throttle budget is in the Redis cache).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from knowledge.models import KnowledgeDomain
from observability.models import InvocationFeedback, ToolInvocation
from retrieval.agents.tokens import tool_token_issue
from retrieval.models import AgentProfile
from tests.retrieval.conftest import seed_documents

pytestmark = pytest.mark.django_db

LOOKUP = "/api/tools/lookup_knowledge"
FEEDBACK = "/api/tools/lookup_knowledge/feedback"
DIFY = "/api/dify/retrieval"


@dataclass
class Agent:
    name: str
    token: str
    client: APIClient

    @property
    def user(self):
        return AgentProfile.objects.get(user__username=self.name).user

    def lookup(self, query: str, session_id: str):
        return self.client.post(LOOKUP, {"query": query, "session_id": session_id}, format="json")


def _agent(prefix: str) -> Agent:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    token = tool_token_issue(name=name).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return Agent(name, token, client)


@pytest.fixture
def honest() -> Agent:
    return _agent("honest")


@pytest.fixture
def hostile() -> Agent:
    return _agent("hostile")


@pytest.fixture
def world(corpus):
    seed_documents(corpus)
    for domain in ("infrastructure", "api", "troubleshooting", "payment"):
        KnowledgeDomain.objects.get_or_create(domain_id=domain, defaults={"description": f"{domain} docs"})
    return corpus


def _docs(body: dict) -> set[str]:
    return {d["docKey"] for d in ([body["primary"]] if body["primary"] else []) + body["supplement"]}


# --- 1. sessions belong to the agent -------------------------------------------------------------
def test_another_agent_cannot_read_or_clear_a_session_of_the_same_id(world, honest, hostile):
    shared = f"conv-42-{uuid.uuid4().hex[:6]}"
    first = honest.lookup("ERR_TIMEOUT", shared).json()
    assert first["primary"]["docKey"] == "api/error-codes.md"

    # B reads "its" conv-42: nothing, and nothing of A's documents or domains.
    read = hostile.client.get(f"/api/sessions/{shared}/retrievals")
    assert read.status_code == 200 and read.json() == {"domains": {}}
    # B clears "its" conv-42: A's session is untouched, A's next lookup still withholds the doc.
    assert hostile.client.delete(f"/api/sessions/{shared}/retrievals").status_code == 204
    assert honest.client.get(f"/api/sessions/{shared}/retrievals").json() == {
        "domains": {"api": ["api/error-codes.md"]}
    }
    again = honest.lookup("ERR_TIMEOUT", shared).json()
    assert again["relevanceLevel"] == "DEDUPED" and "api/error-codes.md" not in _docs(again)


def test_another_agent_cannot_poison_a_session_it_guessed(world, honest, hostile):
    victim = f"s-victim-{uuid.uuid4().hex[:6]}"
    poisoned = hostile.lookup("ERR_TIMEOUT", victim).json()
    assert poisoned["primary"]["docKey"] == "api/error-codes.md"

    # A's first lookup in the session B used gets the document: no DEDUPED naming a document A
    # never received, no domain A never retrieved.
    mine = honest.lookup("ERR_TIMEOUT", victim).json()
    assert mine["found"] is True and mine["relevanceLevel"] != "DEDUPED"
    assert mine["primary"]["docKey"] == "api/error-codes.md"
    assert mine["retrievedDomainsThisSession"] == ["api"]


def test_records_keep_the_agent(world, honest, hostile):
    session = f"rec-{uuid.uuid4().hex[:6]}"
    honest.lookup("ERR_TIMEOUT", session)
    hostile.lookup("ERR_TIMEOUT", session)
    rows = ToolInvocation.objects.filter(session_id=session).order_by("id")
    assert [r.agent.username for r in rows] == [honest.name, hostile.name]


# --- 3. feedback: own invocations only, opaque ids -----------------------------------------------
def test_invocation_ids_are_opaque_and_another_agents_answer_like_an_unknown_one(world, honest, hostile):
    session = f"fb-{uuid.uuid4().hex[:6]}"
    ids = [honest.lookup("ERR_TIMEOUT", f"{session}-{i}")["X-Invocation-Id"] for i in range(2)]
    ids.append(hostile.lookup("ERR_TIMEOUT", session)["X-Invocation-Id"])
    # Not the sequential key: nothing to count traffic with, nothing to guess.
    assert all(i.startswith("inv_") and not i[4:].isdigit() for i in ids)
    assert {ToolInvocation.objects.get(public_id=i).pk for i in ids} != set()
    assert ids[0] not in {str(r.pk) for r in ToolInvocation.objects.all()}

    foreign = hostile.client.post(FEEDBACK, {"invocation_id": ids[0], "helpful": False}, format="json")
    unknown = hostile.client.post(
        FEEDBACK, {"invocation_id": "inv_" + "x" * 22, "helpful": False}, format="json"
    )
    assert foreign.status_code == unknown.status_code == 400
    # Exactly the same answer, apart from the id the caller sent itself.
    assert foreign.json()["error"]["message"].replace(ids[0], "ID") == unknown.json()["error"][
        "message"
    ].replace("inv_" + "x" * 22, "ID")
    # The sequential key of A's call does not work either.
    by_pk = ToolInvocation.objects.get(public_id=ids[0]).pk
    assert (
        hostile.client.post(FEEDBACK, {"invocation_id": by_pk, "helpful": False}, format="json").status_code
        == 400
    )
    assert not InvocationFeedback.objects.exists()

    own = honest.client.post(FEEDBACK, {"invocation_id": ids[0], "helpful": True}, format="json")
    assert own.status_code == 201
    feedback = InvocationFeedback.objects.get()
    assert (feedback.user.username, feedback.source) == (honest.name, "AGENT")


def test_staff_judgements_from_the_admin_count_as_staff(world, honest, admin_client):
    invocation_id = honest.lookup("ERR_TIMEOUT", f"st-{uuid.uuid4().hex[:6]}")["X-Invocation-Id"]
    invocation = ToolInvocation.objects.get(public_id=invocation_id)
    response = admin_client.post(
        f"/admin/observability/toolinvocation/{invocation.pk}/feedback/", {"helpful": "0", "comment": ""}
    )
    assert response.status_code == 302
    assert InvocationFeedback.objects.get(invocation=invocation).source == "STAFF"


# --- 4. one throttle budget per agent, Retry-After on every 429 -----------------------------------
def test_one_budget_per_agent_across_every_endpoint_and_every_429_says_when(world, honest, hostile, settings):
    endpoints = [
        ("post", LOOKUP, {"query": "ERR_TIMEOUT", "session_id": "budget"}),
        ("get", "/api/sessions/budget/retrievals", None),
        ("post", FEEDBACK, {"invocation_id": "inv_nosuchcall", "helpful": True}),
        ("get", "/api/knowledge-map", None),
        ("get", "/api/prompts/planner", None),
        ("get", "/api/prompts/executor", None),
        ("get", "/api/tools/lookup_knowledge/schema", None),
    ]
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"tool": f"{len(endpoints)}/min"},
    }
    # The budget is spent once over all endpoints (before, each had its own or a per-token one).
    for method, url, body in endpoints:
        response = getattr(honest.client, method)(url, body, format="json")
        assert response.status_code < 429, (url, response.status_code)
    for method, url, body in endpoints:
        refused = getattr(honest.client, method)(url, body, format="json")
        assert refused.status_code == 429, url
        assert int(refused["Retry-After"]) >= 1, url
    # A second token of the same agent gets no extra budget.
    second_token = APIClient()
    second_token.credentials(
        HTTP_AUTHORIZATION=f"Token {tool_token_issue(name=honest.name, rotate=True).key}"
    )
    assert second_token.post(LOOKUP, endpoints[0][2], format="json").status_code == 429

    # Dify's endpoint spends the same budget and its 429 says when, in Dify's error format.
    dify = APIClient()
    dify.credentials(HTTP_AUTHORIZATION=f"Bearer {tool_token_issue(name=honest.name, rotate=True).key}")
    body = {
        "knowledge_id": "api",
        "query": "ERR_TIMEOUT",
        "retrieval_setting": {"top_k": 2, "score_threshold": 0},
    }
    refused = dify.post(DIFY, body, format="json")
    assert refused.status_code == 429 and refused.json()["error_code"] == 3002
    assert int(refused["Retry-After"]) >= 1

    # The other agent's budget is its own.
    assert hostile.lookup("ERR_TIMEOUT", "budget").status_code == 200


# --- 6. Dify cleans input as REST does --------------------------------------------------------------
def test_dify_refuses_a_lone_surrogate_as_rest_does_and_answers_an_oversized_body_in_its_format(
    world, honest, settings
):
    dify = APIClient()
    dify.credentials(HTTP_AUTHORIZATION=f"Bearer {honest.token}")
    raw = '{"knowledge_id": "*", "query": "\\ud800", "retrieval_setting": {"top_k": 2, "score_threshold": 0}}'
    response = dify.post(DIFY, raw, content_type="application/json")
    assert response.status_code == 400  # not 503 "vector search unavailable"
    assert response.json()["error_code"] == 3001 and response.json()["error_msg"].startswith("query:")
    rest = honest.client.post(
        LOOKUP, '{"query": "\\ud800", "session_id": "s"}', content_type="application/json"
    )
    assert rest.status_code == 400 and rest.json()["error"]["message"].startswith("query:")

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = dify.post(DIFY, {"knowledge_id": "*", "query": "x" * 2000}, format="json")
    assert big.status_code == 413
    assert big["Content-Type"] == "application/json"
    assert big.json()["error_code"] == 3003 and "DATA_UPLOAD_MAX_MEMORY_SIZE" in big.json()["error_msg"]


# --- 8. domain scopes --------------------------------------------------------------------------------
@pytest.fixture
def scoped(honest):
    """A is limited to the api domain, in its profile (what staff edit in the admin)."""
    profile = AgentProfile.objects.get(user__username=honest.name)
    profile.allowed_domains.set([KnowledgeDomain.objects.get(domain_id="api")])
    return honest


HIDDEN = ("infrastructure", "troubleshooting", "payment", "mysql-pool", "MySQL", "连接池")


def _mentions_hidden(text: str) -> list[str]:
    return [word for word in HIDDEN if word in text]


def test_a_scoped_agent_sees_only_its_domains_everywhere(world, scoped, hostile):
    session = f"scope-{uuid.uuid4().hex[:6]}"
    inside = scoped.lookup("ERR_TIMEOUT", session)
    assert inside.json()["primary"]["docKey"] == "api/error-codes.md"
    outside = scoped.lookup("数据库连接池配置", session)
    assert outside.status_code == 200 and outside.json()["found"] is False
    assert _mentions_hidden(outside.content.decode()) == []
    # The unscoped agent finds it: the document exists.
    assert hostile.lookup("数据库连接池配置", session).json()["primary"]["domain"] == "infrastructure"

    knowledge_map = scoped.client.get("/api/knowledge-map?format=json").json()
    assert [d["domain_id"] for d in knowledge_map["available_knowledge_domains"]] == ["api"]
    planner = scoped.client.get("/api/prompts/planner").content.decode()
    assert "api" in planner and _mentions_hidden(planner) == []

    dify = APIClient()
    dify.credentials(HTTP_AUTHORIZATION=f"Bearer {scoped.token}")
    setting = {"top_k": 10, "score_threshold": 0}
    every = dify.post(
        DIFY, {"knowledge_id": "*", "query": "数据库连接池配置", "retrieval_setting": setting}, format="json"
    )
    assert every.status_code == 200 and {r["metadata"]["domain"] for r in every.json()["records"]} <= {"api"}
    hidden = dify.post(
        DIFY,
        {"knowledge_id": "infrastructure", "query": "连接池", "retrieval_setting": setting},
        format="json",
    )
    unknown = dify.post(
        DIFY, {"knowledge_id": "no-such", "query": "连接池", "retrieval_setting": setting}, format="json"
    )
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["error_msg"].replace("infrastructure", "X") == unknown.json()["error_msg"].replace(
        "no-such", "X"
    )


def test_narrowing_a_scope_hides_domains_the_session_already_retrieved(world, honest):
    session = f"narrow-{uuid.uuid4().hex[:6]}"
    assert honest.lookup("数据库连接池配置", session).json()["primary"]["domain"] == "infrastructure"
    AgentProfile.objects.get(user__username=honest.name).allowed_domains.set(
        [KnowledgeDomain.objects.get(domain_id="api")]
    )
    body = honest.lookup("ERR_TIMEOUT", session)
    assert body.json()["retrievedDomainsThisSession"] == ["api"]
    assert _mentions_hidden(body.content.decode()) == []
    assert honest.client.get(f"/api/sessions/{session}/retrievals").json() == {
        "domains": {"api": ["api/error-codes.md"]}
    }


def test_a_small_scope_among_large_domains_still_gets_its_documents(world, honest):
    """The scope is a Milvus filter, not a cut after the search: with ``top_k`` 3 and twelve
    closer documents in another domain, the scoped agent's one document is still found."""
    for n in range(12):
        world.add(
            f"payment/refund-{n}.md",
            title=f"退款到账说明 {n}",
            domain="payment",
            chunks=[f"退款到账时间：原路退回一般 {n + 1} 个工作日到账，退款到账以银行为准。"],
        )
    world.add(
        "api/refund-api.md",
        title="退款接口",
        domain="api",
        chunks=["POST /refunds 发起退款，退款结果通过回调通知。"],
    )
    profile = AgentProfile.objects.get(user__username=honest.name)
    profile.allowed_domains.set([KnowledgeDomain.objects.get(domain_id="api")])
    session = f"small-scope-{uuid.uuid4().hex[:6]}"
    body = honest.client.post(
        LOOKUP, {"query": "退款多久到账", "session_id": session, "top_k": 3}, format="json"
    ).json()
    assert body["found"] is True and body["primary"]["docKey"] == "api/refund-api.md"
    recorded = ToolInvocation.objects.filter(agent__username=honest.name).latest("id").retrieval_details
    assert {c["domain"] for c in recorded["l1_candidates"]} == {"api"}
