"""The planner's knowledge map (seed 004 Part B): GET /api/knowledge-map (YAML, ?format=json)
and GET /api/prompts/planner with the map injected; never in the executor prompt."""

import json

import pytest
import yaml
from django.core.cache import cache
from rest_framework.test import APIClient

from knowledge.models import ApiDocument, KnowledgeDomain
from knowledge.selectors import knowledge_map_build
from retrieval.agents.tokens import tool_token_issue
from tests.support.domain_map import indexed_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus():
    indexed_document(
        doc_key="pay/fail.md", domain="payment", title="支付失败排查手册", covers=["支付超时", "扣款无回调"]
    )
    indexed_document(doc_key="pay/refund.md", domain="payment", title="退款处理指南", covers=["退款未到账"])
    indexed_document(doc_key="infra/db.md", domain="infrastructure", title="DB pool", covers=["HikariCP"])
    indexed_document(
        doc_key="infra/wip.md", domain="infrastructure", title="Draft", status=ApiDocument.Status.PENDING
    )
    indexed_document(
        doc_key="only/failed.md", domain="broken", title="Broken", status=ApiDocument.Status.FAILED
    )
    KnowledgeDomain.objects.create(
        domain_id="payment",
        description="支付链路问题排查",
        when_to_retrieve="用户问题涉及支付、退款、对账时检索；优先检索一次，勿重复",
    )
    KnowledgeDomain.objects.create(
        domain_id="empty-domain", description="nothing indexed", when_to_retrieve="never"
    )


@pytest.fixture
def agent():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {tool_token_issue(name='planner-agent').key}")
    return client


EXPECTED = {
    "available_knowledge_domains": [
        {
            "domain_id": "infrastructure",
            "description": "",
            "when_to_retrieve": "",
            "documents": [{"title": "DB pool", "covers": ["HikariCP"]}],
        },
        {
            "domain_id": "payment",
            "description": "支付链路问题排查",
            "when_to_retrieve": "用户问题涉及支付、退款、对账时检索；优先检索一次，勿重复",
            "documents": [
                {"title": "支付失败排查手册", "covers": ["支付超时", "扣款无回调"]},
                {"title": "退款处理指南", "covers": ["退款未到账"]},
            ],
        },
    ]
}


def test_the_map_lists_domains_with_indexed_documents_in_the_seeds_shape(
    corpus, django_assert_max_num_queries
):
    with django_assert_max_num_queries(2):
        assert knowledge_map_build() == EXPECTED


def test_get_knowledge_map_is_the_seeds_yaml_by_default(corpus, agent):
    response = agent.get("/api/knowledge-map")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    text = response.content.decode()
    assert text.startswith("available_knowledge_domains:\n- domain_id: infrastructure\n")
    assert "支付失败排查手册" in text  # Chinese readable, not \u-escaped
    assert yaml.safe_load(text) == EXPECTED


def test_get_knowledge_map_as_json(corpus, agent):
    response = agent.get("/api/knowledge-map?format=json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert json.loads(response.content) == EXPECTED


def test_an_unknown_format_is_a_400_naming_the_parameter_in_json(agent):
    response = agent.get("/api/knowledge-map?format=xml")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json()["error"]["message"] == "format: must be one of: yaml, json"


@pytest.mark.parametrize("path", ["/api/knowledge-map", "/api/prompts/planner"])
def test_endpoints_need_a_tool_token(path):
    client = APIClient()
    response = client.get(path)
    assert response.status_code == 401 and response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "not_authenticated"
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get(path).status_code == 401


@pytest.mark.parametrize("path", ["/api/knowledge-map", "/api/prompts/planner"])
def test_endpoints_are_throttled_per_agent(agent, settings, path):
    cache.clear()
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "tool": "2/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    try:
        assert [agent.get(path).status_code for _ in range(3)] == [200, 200, 429]
    finally:
        cache.clear()


def test_the_planner_prompt_carries_the_map(corpus, agent):
    response = agent.get("/api/prompts/planner")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    prompt = response.content.decode()
    assert "{{ knowledge_map }}" not in prompt
    block = prompt.split("```yaml\n", 1)[1].split("\n```", 1)[0]
    assert yaml.safe_load(block) == EXPECTED

    as_json = agent.get("/api/prompts/planner?format=json").json()
    assert as_json == {"name": "planner", "content": prompt}


def test_the_planner_prompt_follows_the_current_map(agent):
    before = agent.get("/api/prompts/planner").content.decode()
    assert "available_knowledge_domains: []" in before
    indexed_document(doc_key="ops/oncall.md", domain="operations", title="值班手册", covers=["告警升级"])
    after = agent.get("/api/prompts/planner").content.decode()
    assert "domain_id: operations" in after and "告警升级" in after


def test_the_executor_prompt_never_contains_the_map(corpus, agent):
    from django.urls import reverse

    prompt = agent.get(reverse("retrieval:executor-prompt")).content.decode()
    assert prompt.strip()
    for leak in (
        "available_knowledge_domains",
        "支付链路问题排查",
        "用户问题涉及支付、退款、对账时检索",
        "退款处理指南",
    ):
        assert leak not in prompt
