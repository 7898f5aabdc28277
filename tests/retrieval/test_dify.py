"""Dify's External Knowledge API: POST /api/dify/retrieval, as Dify calls it.

The example request is copied from Dify's documentation ("External Knowledge API", Request
Syntax): knowledge_id "your-knowledge-id", query "your question", top_k 2, score_threshold 0.5.
"""

import copy

import pytest
from rest_framework.test import APIClient

from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue

URL = "/api/dify/retrieval"
DIFY_EXAMPLE = {
    "knowledge_id": "your-knowledge-id",
    "query": "your question",
    "retrieval_setting": {"top_k": 2, "score_threshold": 0.5},
}

pytestmark = pytest.mark.django_db


@pytest.fixture
def dify(db):
    token = tool_token_issue(name="dify-workspace")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    return client


def _post(client, body):
    return client.post(URL, body, format="json")


def _body(knowledge_id="*", query="数据库连接池配置", top_k=5, threshold=0.0, condition=None):
    body = {
        "knowledge_id": knowledge_id,
        "query": query,
        "retrieval_setting": {"top_k": top_k, "score_threshold": threshold},
    }
    if condition is not None:
        body["metadata_condition"] = condition
    return body


# --- Dify's own example ----------------------------------------------------------------------------
def test_the_documented_example_for_an_unknown_knowledge_id_is_a_404_with_code_2001(dify, seeded_corpus):
    response = _post(dify, DIFY_EXAMPLE)
    assert response.status_code == 404
    assert response.json()["error_code"] == 2001
    assert "your-knowledge-id" in response.json()["error_msg"]
    recorded = ToolInvocation.objects.get(tool_name="dify_retrieval")
    assert recorded.status == "ERROR" and recorded.request["knowledge_id"] == "your-knowledge-id"


def test_the_documented_example_against_a_domain_of_that_name_answers_records(dify, seeded_corpus):
    # Given a domain named as in Dify's example, holding a document about "your question".
    seeded_corpus.add(
        "faq/your-question.md",
        title="Your question answered",
        domain="your-knowledge-id",
        chunks=["your question", "Another section about something else entirely: refunds and taxes."],
    )
    response = _post(dify, copy.deepcopy(DIFY_EXAMPLE))
    assert response.status_code == 200
    records = response.json()["records"]
    # Only the matching section: the other one (refunds and taxes) is not relevant to the question
    assert len(records) == 1
    assert all(set(r) == {"content", "score", "title", "metadata"} for r in records)
    assert records[0]["content"] == "your question" and records[0]["title"] == "Your question answered"
    assert all(r["score"] >= 0.5 and isinstance(r["metadata"], dict) for r in records)
    assert all(r["metadata"]["domain"] == "your-knowledge-id" for r in records)
    assert [r["score"] for r in records] == sorted((r["score"] for r in records), reverse=True)


# --- retrieval -------------------------------------------------------------------------------------------
def test_all_domains_top_k_and_scores_are_the_normalised_similarity(dify, seeded_corpus):
    records = _post(dify, _body(top_k=3)).json()["records"]
    assert len(records) == 3
    assert records[0]["metadata"]["doc_key"] == "infrastructure/mysql-pool.md"
    assert records[0]["score"] >= 0.75  # the lookup puts this query HIGHLY_RELEVANT on this document
    assert all(0 <= r["score"] <= 1 for r in records)
    recorded = ToolInvocation.objects.get(tool_name="dify_retrieval")
    assert recorded.status == "SUCCESS" and recorded.request["agent"] == "dify-workspace"
    assert recorded.retrieval_details["returned_doc_keys"][0] == "infrastructure/mysql-pool.md"
    assert recorded.retrieval_details["l1_top_similarity"] == pytest.approx(records[0]["score"], abs=1e-3)


def test_a_domain_id_limits_the_search_to_that_domain(dify, seeded_corpus):
    records = _post(dify, _body(knowledge_id="troubleshooting", top_k=10)).json()["records"]
    assert records and {r["metadata"]["domain"] for r in records} == {"troubleshooting"}


def test_the_score_threshold_drops_weaker_chunks_and_nothing_is_an_empty_list(dify, seeded_corpus):
    every = _post(dify, _body(top_k=20, threshold=0.0)).json()["records"]
    strong = _post(dify, _body(top_k=20, threshold=0.75)).json()["records"]
    assert 0 < len(strong) < len(every)
    assert all(r["score"] >= 0.75 for r in strong)
    assert _post(dify, _body(top_k=20, threshold=1.0)).json() == {"records": []}


@pytest.mark.parametrize(
    ("condition", "expected_domains"),
    [
        ({"conditions": [{"name": ["domain"], "comparison_operator": "is", "value": "api"}]}, {"api"}),
        (
            {"conditions": [{"name": "domain", "comparison_operator": "is not", "value": "infrastructure"}]},
            {"api", "troubleshooting", "payment"},
        ),
        (
            {"conditions": [{"name": "domain", "comparison_operator": "in", "value": ["api", "payment"]}]},
            {"api", "payment"},
        ),
        (
            {
                "conditions": [
                    {"name": "domain", "comparison_operator": "not in", "value": ["api", "infrastructure"]}
                ]
            },
            {"troubleshooting", "payment"},
        ),
        (
            {"conditions": [{"name": "title", "comparison_operator": "contains", "value": "redis"}]},
            {"infrastructure"},
        ),
        (
            {"conditions": [{"name": "keywords", "comparison_operator": "is", "value": "ERR_TIMEOUT"}]},
            {"api"},
        ),
        (
            {
                "logical_operator": "or",
                "conditions": [
                    {"name": "domain", "comparison_operator": "is", "value": "payment"},
                    {"name": "keywords", "comparison_operator": "contains", "value": "timeout"},
                ],
            },
            {"payment", "api", "infrastructure"},  # HikariCP's keyword connectionTimeout contains it
        ),
        (
            {
                "logical_operator": "and",
                "conditions": [
                    {"name": "domain", "comparison_operator": "is", "value": "infrastructure"},
                    {"name": "title", "comparison_operator": "contains", "value": "连接池"},
                ],
            },
            {"infrastructure"},
        ),
    ],
    ids=["is", "is-not", "in", "not-in", "title-contains", "keyword-is", "or", "and"],
)
def test_metadata_conditions_filter_records(dify, seeded_corpus, condition, expected_domains):
    records = _post(dify, _body(top_k=50, condition=condition)).json()["records"]
    assert {r["metadata"]["domain"] for r in records} == expected_domains


def test_and_of_two_conditions_is_narrower_than_either(dify, seeded_corpus):
    both = {
        "logical_operator": "and",
        "conditions": [
            {"name": "domain", "comparison_operator": "is", "value": "infrastructure"},
            {"name": "title", "comparison_operator": "contains", "value": "连接池"},
        ],
    }
    titles = {r["title"] for r in _post(dify, _body(top_k=50, condition=both)).json()["records"]}
    assert titles == {"MySQL 连接池配置说明", "连接池耗尽排查"}


# --- errors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("header", [None, "Token abc", "Bearer", "Bearer a b", "bearer abc"], ids=str)
def test_a_malformed_authorization_header_is_403_code_1001(db, header):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = _post(client, DIFY_EXAMPLE)
    assert response.status_code == 403
    assert response.json() == {
        "error_code": 1001,
        "error_msg": "Invalid Authorization header format. Expected 'Bearer <api-key>' format.",
    }


def test_a_wrong_key_is_403_code_1002(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer not-a-token")
    response = _post(client, DIFY_EXAMPLE)
    assert response.status_code == 403
    assert response.json() == {"error_code": 1002, "error_msg": "Authorization failed"}
    assert not ToolInvocation.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "retrieval_setting": {"top_k": 1, "score_threshold": 0}}, "knowledge_id"),
        ({"knowledge_id": "*", "query": " ", "retrieval_setting": {"top_k": 1}}, "query"),
        ({"knowledge_id": "*", "query": "\u200b\ufeff", "retrieval_setting": {"top_k": 1}}, "query"),
        ({"knowledge_id": "*", "query": "x"}, "retrieval_setting"),
        ({"knowledge_id": "*", "query": "x", "retrieval_setting": {"top_k": 0}}, "retrieval_setting.top_k"),
        (
            {"knowledge_id": "*", "query": "x", "retrieval_setting": {"top_k": 1, "score_threshold": 2}},
            "retrieval_setting.score_threshold",
        ),
        (
            _body(
                condition={"conditions": [{"name": ["domain", 3], "comparison_operator": "is", "value": "a"}]}
            ),
            "metadata_condition.conditions[0].name",
        ),
        (
            _body(condition={"conditions": [{"name": "domain", "comparison_operator": "≈", "value": "a"}]}),
            "metadata_condition.conditions[0].comparison_operator",
        ),
        (
            _body(condition={"conditions": [{"name": "domain", "comparison_operator": "≥", "value": "a"}]}),
            "metadata_condition.conditions[0].value",
        ),
        (
            _body(
                condition={"conditions": [{"name": "domain", "comparison_operator": "in", "value": {"a": 1}}]}
            ),
            "metadata_condition.conditions[0].value",
        ),
        (
            _body(condition={"logical_operator": "xor", "conditions": []}),
            "metadata_condition.logical_operator",
        ),
    ],
)
def test_an_invalid_body_is_a_400_naming_the_field_and_is_recorded(dify, body, field):
    response = _post(dify, body)
    assert response.status_code == 400
    assert response.json()["error_code"] == 3001
    assert response.json()["error_msg"].startswith(f"{field}: ")
    assert ToolInvocation.objects.get(tool_name="dify_retrieval").status == "ERROR"


def test_malformed_json_is_a_400_in_difys_error_shape(dify):
    response = dify.post(URL, "{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["error_code"] == 3001
