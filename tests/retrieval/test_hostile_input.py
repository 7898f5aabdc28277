"""Hostile input to the tool endpoints: every bad request is a 4xx in the API's error format,
naming the field (or the body) at fault; never a 500, nothing half-recorded."""

import json

import pytest
from django.urls import reverse

from observability.models import ToolInvocation

URL = reverse("retrieval:lookup-knowledge")


def _post_raw(client, body: str | bytes):
    return client.post(URL, data=body, content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        # oversized: over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)
        ('{"query": "' + "x" * 3_000_000 + '", "session_id": "s"}', 413, "request_too_large", "body:"),
        # a huge session id that fits the body limit
        (json.dumps({"query": "q", "session_id": "s" * 1_000_000}), 400, "invalid", "session_id:"),
        # nesting that would exhaust the parser's recursion
        ("[" * 100_000 + "]" * 100_000, 400, "parse_error", "nested too deeply"),
        ('{"query": ' + "[" * 50_000 + "]" * 50_000 + ', "session_id": "s"}', 400, "parse_error", "nested"),
        # unicode that is not text: lone surrogates (JSON escapes let them through)
        ('{"query": "\\ud800abc", "session_id": "s"}', 400, "invalid", "query: Contains a character"),
        # a query that shows nothing: zero-width space, BOM, zero-width joiner, a bidi mark
        (
            '{"query": " \\u200b\\ufeff\\u200d\\u200e ", "session_id": "s"}',
            400,
            "invalid",
            "query: This field may not be blank: it holds only invisible characters.",
        ),
        ('{"query": "ERR_TIMEOUT", "session_id": "\\udfff"}', 400, "invalid", "session_id: Contains a"),
        # bytes that are not UTF-8
        (b'{"query": "\xff\xfe", "session_id": "s"}', 400, "parse_error", "JSON parse error"),
        # numbers JSON cannot hold, wrong types
        ('{"query": "q", "session_id": "s", "top_k": 1e400}', 400, "parse_error", "out of range"),
        ('{"query": "q", "session_id": "s", "top_k": NaN}', 400, "parse_error", "NaN"),
        ('{"query": "q", "session_id": "s", "top_k": 5.0}', 400, "invalid", "top_k:"),
        ('{"query": "q", "session_id": "s", "top_k": true}', 400, "invalid", "top_k:"),
        ('{"query": {"$ne": ""}, "session_id": "s"}', 400, "invalid", "query:"),
        ('{"query": "q", "session_id": ["s"]}', 400, "invalid", "session_id:"),
        ('"just a string"', 400, "invalid", "query:"),
    ],
)
def test_hostile_bodies_are_4xx_naming_the_field(agent_client, body, status, code, message):
    response = _post_raw(agent_client, body)
    assert response.status_code == status, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == code and message in error["message"], error
    # Whatever was recorded (a failed call) is readable back: nothing half-written
    for record in ToolInvocation.objects.all():
        assert record.status == "ERROR"
        json.dumps(record.request)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query",
    [
        "😀👨‍👩‍👧‍👦 ERR_TIMEOUT",  # 4-byte UTF-8 and joiners (utf8mb4 on MySQL)
        "ERR\u0000TIMEOUT",  # NUL
        "\u202eTUOEMIT_RRE\u202c",  # right-to-left override
        "e\u0301\u0301\u0301\u0301",  # stacked combining marks
        "\u200bERR_TIMEOUT\u2060",  # zero-width characters around a visible query
    ],
)
def test_odd_but_valid_unicode_is_answered_and_recorded(agent_client, vector_store, query, session_id):
    response = agent_client.post(URL, {"query": query, "session_id": session_id + "😀"}, format="json")
    # Answered, not refused: nothing in the (empty) knowledge base matches any of them
    assert response.status_code == 200, response.content[:300]
    assert response.json()["found"] is False
    record = ToolInvocation.objects.get(public_id=response["X-Invocation-Id"])
    assert record.request["query"] == query
    assert record.session_id == session_id + "😀"


@pytest.mark.django_db
def test_a_huge_session_id_in_the_path_is_refused_naming_it(agent_client):
    response = agent_client.get(reverse("retrieval:session-retrievals", args=["s" * 5000]))
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("session_id:")
