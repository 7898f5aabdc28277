"""POST /api/tools/lookup_knowledge/feedback: agents judge a lookup's result (token auth)."""

import pytest
from rest_framework.test import APIClient

from observability.models import InvocationFeedback
from retrieval.agents.tokens import agent_token_issue
from tests.observability.factories import ToolInvocationFactory

URL = "/api/tools/lookup_knowledge/feedback"


@pytest.fixture
def agent_user(db, django_user_model):
    return django_user_model.objects.create_user("feedback-agent")


@pytest.fixture
def agent(agent_user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {agent_token_issue(user=agent_user).key}")
    return client


@pytest.fixture
def invocation(agent_user):
    # The agent's own call: agents judge only those, by the opaque id they were given.
    return ToolInvocationFactory(relevance_level="REFERENCE", similarity=0.58, agent=agent_user)


def test_agent_feedback_is_recorded_and_replaced_on_a_second_judgement(agent, invocation):
    first = agent.post(
        URL, {"invocation_id": invocation.public_id, "helpful": False, "comment": "太泛了"}, format="json"
    )
    assert first.status_code == 201
    assert first.json() == {
        "invocation_id": invocation.public_id,
        "helpful": False,
        "comment": "太泛了",
        "replaced": False,
    }
    second = agent.post(URL, {"invocation_id": invocation.public_id, "helpful": True}, format="json")
    assert second.status_code == 200 and second.json()["replaced"] is True
    feedback = InvocationFeedback.objects.get()
    assert (feedback.helpful, feedback.comment, feedback.source) == (True, "", "AGENT")
    assert feedback.user.username == "feedback-agent"


def test_without_a_token_nothing_is_recorded(client, invocation):
    response = client.post(
        URL, {"invocation_id": invocation.public_id, "helpful": True}, content_type="application/json"
    )
    assert response.status_code == 401
    assert not InvocationFeedback.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"helpful": True}, "invocation_id"),
        ({"invocation_id": "abc", "helpful": True}, "invocation_id"),
        ({"invocation_id": "inv_x" * 20, "helpful": True}, "invocation_id"),
        ({"invocation_id": "inv_x"}, "helpful"),
        ({"invocation_id": "inv_x", "helpful": "yes"}, "helpful"),
        ({"invocation_id": "inv_x", "helpful": 1}, "helpful"),
        ({"invocation_id": "inv_x", "helpful": True, "comment": "x" * 2001}, "comment"),
    ],
)
def test_bad_input_names_the_field(agent, invocation, body, field):
    response = agent.post(URL, body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and error["message"].startswith(f"{field}:")
    assert not InvocationFeedback.objects.exists()


def test_unknown_invocation_names_the_field(agent, invocation):
    response = agent.post(URL, {"invocation_id": "inv_nosuchinvocation", "helpful": True}, format="json")
    assert response.status_code == 400
    assert (
        response.json()["error"]["message"]
        == "invocation_id: no tool invocation of yours with id 'inv_nosuchinvocation'"
    )


def test_feedback_endpoint_is_in_the_api_schema(client, db):
    assert "/api/tools/lookup_knowledge/feedback" in client.get("/api/schema/").content.decode()
