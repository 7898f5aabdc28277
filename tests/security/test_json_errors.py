"""Every error under /api/, /mcp/ and /healthz is JSON, in DEBUG and in production alike: a
foreign Host, a query string of more than 1,000 parameters, an unknown path (a trailing slash
too many or too few), a refused method, a body too large, a server error. The API's format is
{"error": {"code", "message", "details"}}; Dify's endpoint keeps {"error_code", "error_msg"}.
Staff pages answer a query string of too many parameters with a 400, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from config import health
from retrieval.agents.tokens import tool_token_issue

pytestmark = pytest.mark.django_db
MANY = "&".join(f"p{i}=1" for i in range(1100))
DIFY = "/api/dify/retrieval"


@pytest.fixture(params=[True, False], ids=["debug", "production"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


@pytest.fixture
def agent():
    token = tool_token_issue(name="error-prober").key
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token}"), token


def _api_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json", response.content[:300]
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code and body["error"]["message"], body
    return body["error"]


def _dify_error(response, status: int, error_code: int) -> str:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error_code", "error_msg"} and body["error_code"] == error_code, body
    return body["error_msg"]


# --- refused before any view runs ------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/knowledge-map", "/api/tools/lookup_knowledge", "/healthz"])
def test_a_query_string_of_too_many_parameters_is_a_json_400(debug, agent, path):
    client, _ = agent
    error = _api_error(client.get(f"{path}?{MANY}"), 400, "too_many_parameters")
    assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in error["message"]
    anonymous = Client(raise_request_exception=False).get(f"{path}?{MANY}")
    _api_error(anonymous, 400, "too_many_parameters")


def test_dify_gets_its_own_format_for_too_many_parameters(debug, agent):
    _, token = agent
    response = Client().post(
        f"{DIFY}?{MANY}", {}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in _dify_error(response, 400, 3001)


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/api/knowledge-map"), ("post", "/api/tools/lookup_knowledge"), ("get", "/healthz")],
)
def test_a_foreign_host_is_a_json_400(debug, agent, method, path):
    client, _ = agent
    response = getattr(client, method)(path, HTTP_HOST="evil.example")
    error = _api_error(response, 400, "bad_host")
    assert "evil.example" in error["message"] and "ALLOWED_HOSTS" in error["message"]
    # Nothing of the debug page: no settings, no traceback
    assert b"Traceback" not in response.content and b"SECRET_KEY" not in response.content


def test_dify_gets_its_own_format_for_a_foreign_host(debug):
    response = Client().post(DIFY, {}, content_type="application/json", HTTP_HOST="evil.example")
    assert "evil.example" in _dify_error(response, 400, 3001)


# --- unknown paths, methods, sizes ---------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/nope", "/api", "/api/tools/", "/healthz/", "/mcp/"])
def test_an_unknown_path_is_a_json_404(debug, agent, path):
    client, _ = agent
    _api_error(client.get(path), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path", "meant"),
    [
        ("get", "/api/knowledge-map/", "/api/knowledge-map"),
        ("post", "/api/tools/lookup_knowledge/", "/api/tools/lookup_knowledge"),
        ("get", "/api/schema", None),  # a missing slash where one is needed: Django redirects
    ],
)
def test_a_trailing_slash_too_many_is_a_json_404_naming_the_endpoint(debug, agent, method, path, meant):
    client, _ = agent
    response = getattr(client, method)(path, content_type="application/json")
    if meant is None:
        assert response.status_code == 301 and response["Location"] == "/api/schema/"
        return
    error = _api_error(response, 404, "not_found")
    assert error["details"] == {"did_you_mean": meant} and meant in error["message"]


def test_dify_gets_its_own_format_for_an_unknown_path(debug):
    message = _dify_error(Client().post(f"{DIFY}/", {}, content_type="application/json"), 404, 3004)
    assert DIFY in message


def test_a_refused_method_is_a_json_405_with_allow(debug, agent):
    client, _ = agent
    health_post = client.post("/healthz")
    error = _api_error(health_post, 405, "method_not_allowed")
    assert error["details"] == {"allowed": ["GET"]} and health_post["Allow"] == "GET"
    _api_error(client.put("/api/knowledge-map"), 405, "method_not_allowed")


def test_a_body_too_large_is_a_json_413(debug, agent, settings):
    client, token = agent
    body = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = client.post("/api/tools/lookup_knowledge", body, content_type="application/json")
    _api_error(response, 413, "request_too_large")
    dify = Client().post(DIFY, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    _dify_error(dify, 413, 3003)


def test_a_server_error_is_a_json_500_without_the_traceback(debug, monkeypatch):
    def broken():
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(health, "run_checks", lambda: broken())
    response = Client(raise_request_exception=False).get("/healthz")
    _api_error(response, 500, "server_error")
    assert b"secret internal detail" not in response.content and b"Traceback" not in response.content


# --- staff pages -------------------------------------------------------------------------------------
ADMIN_LISTS = [
    "admin:observability_toolinvocation_changelist",
    "admin:observability_invocationfeedback_changelist",
    "admin:observability_retrievaldashboard_changelist",
    "admin:observability_thresholdcalibration_changelist",
    "admin:knowledge_apidocument_changelist",
    "admin:knowledge_knowledgedomain_changelist",
    "admin:retrieval_agenttoken_changelist",
]


@pytest.mark.parametrize("name", ADMIN_LISTS)
def test_staff_pages_answer_too_many_parameters_with_a_400_not_a_500(debug, admin_user, name):
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    response = client.get(f"{reverse(name)}?{MANY}")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")  # a staff page stays a page
