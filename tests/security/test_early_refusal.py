"""An agent past its budget is refused over REST on the ASGI event loop, before Django: under the
production command Django's requests take turns on a few threads per worker, so a flood's
refusals must not take a turn there (retrieval/entrypoints/early_refusal.py); and each 429 is
sent after API_REFUSAL_DELAY_MS, waiting on the event loop (config/refusal_delay.py)."""

from __future__ import annotations

import uuid

import httpx
import pytest
from django.core.signals import request_started

from retrieval.agents.tokens import tool_token_issue
from tests.retrieval.test_mcp_server import LiveAsgi

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def live_asgi():
    with LiveAsgi() as server:
        yield server


@pytest.fixture
def django_requests():
    """How many requests reached Django (its request_started signal)."""
    seen: list[str] = []

    def count(sender, environ=None, scope=None, **kwargs) -> None:
        seen.append((scope or {}).get("path", "") if scope else "")

    request_started.connect(count, dispatch_uid="test-early-refusal")
    yield seen
    request_started.disconnect(dispatch_uid="test-early-refusal")


def test_an_agent_refused_once_is_refused_again_before_django_with_the_same_answer(
    live_asgi, settings, django_requests
):
    # Given an agent with 3 calls a minute, all spent
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "tool": "3/min"},
    }
    key = tool_token_issue(name=f"early-{uuid.uuid4().hex[:8]}").key
    url = f"http://127.0.0.1:{live_asgi.port}/api/prompts/executor"
    headers = {"Authorization": f"Token {key}"}
    assert [httpx.get(url, headers=headers, timeout=30).status_code for _ in range(3)] == [200] * 3

    # When it asks again: Django's throttle refuses it (and this process remembers the refusal)
    by_django = httpx.get(url, headers=headers, timeout=30)
    assert by_django.status_code == 429
    reached = len(django_requests)

    # Then its next requests are refused without reaching Django, with the same answer, each
    # after the refusal delay
    settings.API_REFUSAL_DELAY_MS = 300
    for scheme in ("Token", "Bearer"):
        again = httpx.get(url, headers={"Authorization": f"{scheme} {key}"}, timeout=30)
        assert again.elapsed.total_seconds() >= 0.3
        assert again.status_code == 429
        assert again.json()["error"]["code"] == by_django.json()["error"]["code"] == "throttled"
        assert int(again.headers["retry-after"]) >= 1
        assert again.json()["error"]["details"]["retry_after_seconds"] >= 1
    assert len(django_requests) == reached

    # And another agent is served as before
    other = tool_token_issue(name=f"early-{uuid.uuid4().hex[:8]}").key
    assert httpx.get(url, headers={"Authorization": f"Token {other}"}, timeout=30).status_code == 200
    assert len(django_requests) == reached + 1
