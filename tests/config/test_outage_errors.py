"""A database or Redis outage under /api/, /mcp/ and Dify's endpoint answers JSON 503 naming the
part (with Retry-After), never Django's HTML 500 page."""

from __future__ import annotations

from unittest import mock

import pytest
import redis
from django.db import OperationalError
from django.test import Client

from retrieval.agents.tokens import tool_token_issue

LOST = OperationalError(2013, "Lost connection to MySQL server during query")


@pytest.fixture
def token(db) -> str:
    return tool_token_issue(name="outage-probe").key


def _client() -> Client:
    # As a server answers: the exception becomes a response instead of reaching the test.
    return Client(raise_request_exception=False)


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/tools/lookup_knowledge", "/api/dify/retrieval"])
def test_database_outage_answers_json_503_naming_the_database(token, path):
    with mock.patch("django.db.backends.utils.CursorWrapper.execute", side_effect=LOST):
        response = _client().post(
            path,
            {"query": "数据库连接池", "knowledge_id": "x"},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"{'Bearer' if 'dify' in path else 'Token'} {token}",
        )
    assert response.status_code == 503, response.content
    assert response["Content-Type"] == "application/json" and response["Retry-After"] == "5"
    body = response.json()
    if path.startswith("/api/dify/"):
        assert body["error_code"] == 5001 and "database" in body["error_msg"]
    else:
        assert body["error"]["code"] == "database_unavailable"
        assert body["error"]["details"] == {"part": "database"}


@pytest.mark.django_db
def test_redis_outage_answers_json_503_naming_redis(token):
    hung = redis.TimeoutError("Timeout reading from socket")
    with mock.patch("rest_framework.views.APIView.initial", side_effect=hung):
        response = _client().post(
            "/api/tools/lookup_knowledge",
            {"query": "q"},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Token {token}",
        )
    assert response.status_code == 503 and response.json()["error"]["code"] == "redis_unavailable"


@pytest.mark.django_db
def test_a_bug_stays_a_500(token):
    with mock.patch("rest_framework.views.APIView.initial", side_effect=ValueError("bug")):
        response = _client().post(
            "/api/tools/lookup_knowledge",
            {"query": "q"},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Token {token}",
        )
    assert response.status_code == 500 and response.json()["error"]["code"] == "server_error"
