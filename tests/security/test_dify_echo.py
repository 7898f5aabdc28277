"""Dify's errors quote what the client sent, briefly: a 100,000-character ``knowledge_id`` or
condition value comes back as its first 64 characters, not whole (the recorded request keeps it).
"""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue

pytestmark = pytest.mark.django_db
DIFY = "/api/dify/retrieval"


@pytest.fixture
def dify(vector_store) -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {tool_token_issue(name=f'dify-{uuid.uuid4().hex[:6]}').key}"
    )
    return client


def _body(**extra) -> dict:
    return {"knowledge_id": "*", "query": "ERR_TIMEOUT", "retrieval_setting": {"top_k": 2}, **extra}


def test_an_unknown_knowledge_id_of_100000_characters_is_quoted_by_its_first_64(dify):
    knowledge_id = "k" * 100_000
    response = dify.post(DIFY, _body(knowledge_id=knowledge_id), format="json")
    assert response.status_code == 404
    body = response.json()
    assert body["error_code"] == 2001
    assert "k" * 64 in body["error_msg"] and "k" * 65 not in body["error_msg"]
    assert len(response.content) < 300
    # Staff still see the whole request in the recorded call
    assert ToolInvocation.objects.get().request["knowledge_id"] == knowledge_id


def test_a_condition_value_of_100000_characters_is_quoted_by_its_first_64(dify):
    condition = {
        "logical_operator": "and",
        "conditions": [{"name": "updated", "comparison_operator": ">", "value": "v" * 100_000}],
    }
    response = dify.post(DIFY, _body(metadata_condition=condition), format="json")
    assert response.status_code == 400 and response.json()["error_code"] == 3001
    assert len(response.content) < 400 and "v" * 65 not in response.json()["error_msg"]
