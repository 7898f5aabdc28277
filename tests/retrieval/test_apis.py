"""The tool API contract: POST /api/tools/lookup_knowledge, sessions, tool schema, executor prompt."""

import pytest
from rest_framework.test import APIClient

from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue

URL = "/api/tools/lookup_knowledge"

pytestmark = pytest.mark.django_db


def _post(client, body, **kwargs):
    return client.post(URL, body, format="json", **kwargs)


def _error(response):
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    return body["error"]


# --- the happy path -----------------------------------------------------------------------------
def test_a_lookup_answers_in_camel_case_with_the_invocation_header(
    agent_client, seeded_corpus, session_id, seeds_rules
):
    response = _post(agent_client, {"query": "数据库连接池配置", "session_id": session_id})
    assert response.status_code == 200
    body = response.json()
    assert body["found"] is True
    assert body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert body["completenessHint"] == "当前结果已高度相关，继续检索不太可能找到更精准的文档"
    assert body["retrievedDomainsThisSession"] == ["infrastructure"]
    assert set(body["primary"]) == {"title", "domain", "docKey", "headingPath", "content"}
    invocation = ToolInvocation.objects.get(public_id=response["X-Invocation-Id"])
    assert invocation.relevance_level == "HIGHLY_RELEVANT"
    assert invocation.request["agent"].startswith("agent-")
    text = response.content.decode()
    assert "score" not in text and "similarity" not in text and "distance" not in text


def test_top_k_is_optional_and_bounded(agent_client, seeded_corpus, session_id):
    response = _post(agent_client, {"query": "ERR_TIMEOUT", "session_id": session_id, "top_k": 3})
    assert response.status_code == 200
    record = ToolInvocation.objects.get(public_id=response["X-Invocation-Id"])
    assert record.retrieval_details["top_k"] == 3 and len(record.retrieval_details["l1_candidates"]) <= 3


# --- bad input: 400 naming the field, recorded, never a 500 --------------------------------------------
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"session_id": "s1"}, "query"),
        ({"query": "", "session_id": "s1"}, "query"),
        ({"query": "   ", "session_id": "s1"}, "query"),
        ({"query": None, "session_id": "s1"}, "query"),
        ({"query": ["a"], "session_id": "s1"}, "query"),
        ({"query": "x" * 2001, "session_id": "s1"}, "query"),
        ({"query": "ERR_TIMEOUT"}, "session_id"),
        ({"query": "ERR_TIMEOUT", "session_id": ""}, "session_id"),
        ({"query": "ERR_TIMEOUT", "session_id": 12}, "session_id"),
        ({"query": "ERR_TIMEOUT", "session_id": "s" * 129}, "session_id"),
        ({"query": "ERR_TIMEOUT", "session_id": "s1", "top_k": 0}, "top_k"),
        ({"query": "ERR_TIMEOUT", "session_id": "s1", "top_k": "5"}, "top_k"),
        ({"query": "ERR_TIMEOUT", "session_id": "s1", "top_k": 101}, "top_k"),
        ([1, 2], "query"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_is_recorded(agent_client, body, field):
    response = _post(agent_client, body)
    assert response.status_code == 400
    error = _error(response)
    assert error["code"] == "invalid"
    assert error["message"].startswith(f"{field}:")
    assert field in error["details"]
    record = ToolInvocation.objects.get(public_id=response["X-Invocation-Id"])
    assert record.status == "ERROR" and field in record.error


def test_the_query_limit_is_configurable(agent_client, settings):
    settings.RETRIEVAL_MAX_QUERY_CHARS = 10
    response = _post(agent_client, {"query": "x" * 11, "session_id": "s1"})
    assert response.status_code == 400
    assert "10 characters" in _error(response)["message"]


def test_malformed_json_is_a_400(agent_client):
    response = agent_client.post(URL, data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert _error(response)["code"] == "parse_error"


# --- authentication and throttling -----------------------------------------------------------------
def test_without_a_token_it_is_401():
    response = _post(APIClient(), {"query": "ERR_TIMEOUT", "session_id": "s1"})
    assert response.status_code == 401
    assert _error(response)["code"] == "not_authenticated"
    assert ToolInvocation.objects.count() == 0


def test_with_a_wrong_or_rotated_token_it_is_401(agent_client):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef0123456789abcdef01234567")
    assert _post(client, {"query": "ERR_TIMEOUT", "session_id": "s1"}).status_code == 401
    old = tool_token_issue(name="rotating-agent")
    tool_token_issue(name="rotating-agent", rotate=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {old.key}")
    assert _post(client, {"query": "ERR_TIMEOUT", "session_id": "s1"}).status_code == 401


def test_over_the_per_token_throttle_it_is_429(agent_client, settings, seeded_corpus):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"tool": "3/min"},
    }
    statuses = [
        _post(agent_client, {"query": "ERR_TIMEOUT", "session_id": "s1"}).status_code for _ in range(4)
    ]
    assert statuses == [200, 200, 200, 429]
    response = _post(agent_client, {"query": "ERR_TIMEOUT", "session_id": "s1"})
    error = _error(response)
    assert error["code"] == "throttled" and error["details"]["retry_after_seconds"] > 0
    # The budget is per token: another agent is not affected.
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {tool_token_issue(name='another-agent').key}")
    assert _post(other, {"query": "ERR_TIMEOUT", "session_id": "s1"}).status_code == 200


# --- sessions ----------------------------------------------------------------------------------------
@pytest.mark.usefixtures("seeds_rules")  # what the seed corpus returns under the seeds' rules
def test_session_retrievals_list_domains_and_documents_and_delete_clears(
    agent_client, seeded_corpus, session_id
):
    _post(agent_client, {"query": "数据库连接池配置", "session_id": session_id})
    _post(agent_client, {"query": "ERR_TIMEOUT", "session_id": session_id})
    url = f"/api/sessions/{session_id}/retrievals"
    response = agent_client.get(url)
    assert response.status_code == 200
    assert response.json() == {
        "domains": {"infrastructure": ["infrastructure/mysql-pool.md"], "api": ["api/error-codes.md"]}
    }
    assert list(response.json()["domains"]) == ["infrastructure", "api"]
    assert agent_client.delete(url).status_code == 204
    assert agent_client.get(url).json() == {"domains": {}}
    # Cleared: the same query returns its document again.
    again = _post(agent_client, {"query": "数据库连接池配置", "session_id": session_id}).json()
    assert again["relevanceLevel"] == "HIGHLY_RELEVANT"


def test_session_ids_with_slashes_are_addressable(agent_client, seeded_corpus):
    _post(agent_client, {"query": "ERR_TIMEOUT", "session_id": "team/a/1"})
    assert agent_client.get("/api/sessions/team/a/1/retrievals").json() == {
        "domains": {"api": ["api/error-codes.md"]}
    }


def test_session_endpoints_need_a_token():
    assert APIClient().get("/api/sessions/s1/retrievals").status_code == 401
    assert APIClient().delete("/api/sessions/s1/retrievals").status_code == 401


# --- the tool definition and the executor prompt -------------------------------------------------------
def test_the_tool_schema_is_an_openai_function_definition(agent_client):
    response = agent_client.get("/api/tools/lookup_knowledge/schema")
    assert response.status_code == 200
    tool = response.json()
    assert tool["type"] == "function"
    function = tool["function"]
    assert function["name"] == "lookup_knowledge" and function["description"]
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    # The model fills only the query (and optional filters): the framework sends the session.
    assert parameters["required"] == ["query"]
    assert "session_id" not in parameters["properties"]
    assert parameters["properties"]["domains"]["items"] == {"type": "string"}
    assert parameters["properties"]["query"] == {
        "type": "string",
        "description": parameters["properties"]["query"]["description"],
        "minLength": 1,
        "maxLength": 2000,
    }
    assert parameters["properties"]["top_k"]["type"] == "integer"


def test_the_executor_prompt_is_served_as_markdown(agent_client):
    response = agent_client.get("/api/prompts/executor")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    assert "不查全不会被追责，重复检索才会被惩罚" in response.content.decode()


def test_the_openapi_schema_documents_the_tool_endpoints(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    text = response.content.decode()
    for path in (
        "/api/tools/lookup_knowledge",
        "/api/sessions/{session_id}/retrievals",
        "/api/prompts/executor",
    ):
        assert path in text
