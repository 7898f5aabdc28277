"""Fair shared state: one agent minting a session per call cannot fill the action memory, nor
push another agent's sessions out. Past RETRIEVAL_MAX_SESSIONS_PER_AGENT its own least recently
used sessions go, and each one is counted (``sessions_evicted``), in-process and in Redis.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from observability import shared_state
from retrieval.agents.identity import memory_session_key
from retrieval.agents.tokens import tool_token_issue
from retrieval.agents.tracker import (
    MemoryTracker,
    RedisTracker,
    TrackerUnavailable,
    get_tracker,
    reset_tracker,
    sessions_evicted,
)
from tests.retrieval.conftest import Corpus, seed_documents


def _key(agent_id: int, session: str) -> str:
    return memory_session_key(agent_id=agent_id, agent="", session_id=session)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.services)])
def capped(request, settings):
    """A store holding at most 3 sessions per agent."""
    if request.param == "memory":
        yield MemoryTracker(ttl=3600, max_sessions_per_agent=3)
        return
    prefix = f"agentkb:test:{uuid.uuid4().hex[:12]}:"
    tracker = RedisTracker.from_url(settings.REDIS_URL, ttl=3600, prefix=prefix, max_sessions_per_agent=3)
    yield tracker
    tracker.client.delete(*tracker.client.keys(prefix + "*"))


def test_an_agent_minting_sessions_keeps_only_its_latest_and_never_pushes_out_another(capped):
    # Given an honest agent's session holding a document
    capped.mark_many(_key(1, "conv-42"), [("api", "api/error-codes.md")])
    # When a hostile agent opens ten sessions
    for i in range(10):
        capped.mark_many(_key(2, f"flood-{i}"), [("api", f"doc-{i}.md")])
    # Then the hostile agent holds its three latest, seven were evicted and counted
    held = [i for i in range(10) if capped.snapshot(_key(2, f"flood-{i}")).domains]
    assert held == [7, 8, 9]
    assert capped.sessions_evicted() == 7
    # And the honest agent's session is whole
    assert capped.snapshot(_key(1, "conv-42")).domains == {"api": ["api/error-codes.md"]}


def test_a_session_in_use_is_kept_and_the_least_recently_used_goes(capped):
    for name in ("a", "b", "c"):
        capped.mark_many(_key(3, name), [("d", f"{name}.md")])
    capped.snapshot(_key(3, "a"))  # "a" read again: now the most recently used
    capped.mark_many(_key(3, "d"), [("d", "d.md")])
    assert [n for n in "abcd" if capped.snapshot(_key(3, n)).domains] == ["a", "c", "d"]
    # A cleared session frees its place: nothing more is evicted
    capped.clear_session(_key(3, "a"))
    capped.mark_many(_key(3, "e"), [("d", "e.md")])
    assert capped.sessions_evicted() == 1


def test_without_a_cap_nothing_is_evicted():
    tracker = MemoryTracker(ttl=3600)
    for i in range(50):
        tracker.mark_many(_key(4, f"s{i}"), [("d", "x.md")])
    assert tracker.session_count() == 50 and tracker.sessions_evicted() == 0


@pytest.mark.django_db
def test_over_rest_a_flood_of_fresh_sessions_cannot_make_an_honest_agent_see_a_document_twice(
    settings, vector_store
):
    # Given the seeds' corpus, a cap of 3 sessions per agent, and an honest agent that retrieved
    # the error-code document in its session
    settings.RETRIEVAL_MAX_SESSIONS_PER_AGENT = 3
    settings.RETRIEVAL_INDEX_REFRESH_MS = 0
    reset_tracker()
    from knowledge.embeddings import get_embedder

    embedder = get_embedder()
    vector_store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    seed_documents(Corpus(vector_store))

    def client(prefix: str) -> APIClient:
        c = APIClient()
        c.credentials(
            HTTP_AUTHORIZATION=f"Token {tool_token_issue(name=f'{prefix}-{uuid.uuid4().hex[:6]}').key}"
        )
        return c

    honest, hostile = client("honest"), client("hostile")
    url = "/api/tools/lookup_knowledge"
    # Session ids of this run alone: Redis outlives the test database, whose user ids restart.
    conversation, run = f"conv-{uuid.uuid4().hex}", uuid.uuid4().hex
    evicted_before = sessions_evicted()
    first = honest.post(url, {"query": "ERR_TIMEOUT", "session_id": conversation}, format="json").json()
    assert first["primary"]["docKey"] == "api/error-codes.md"

    # When the hostile agent looks up in eight fresh sessions
    for i in range(8):
        assert (
            hostile.post(
                url, {"query": "ERR_TIMEOUT", "session_id": f"s-{run}-{i}"}, format="json"
            ).status_code
            == 200
        )

    # Then the honest agent's session still withholds the document, and the hostile agent's five
    # evicted sessions are counted (on Redis, more when it still holds an earlier run's sessions of
    # a user id the test database gave out again)
    again = honest.post(url, {"query": "ERR_TIMEOUT", "session_id": conversation}, format="json").json()
    assert again["relevanceLevel"] == "DEDUPED"
    evicted = sessions_evicted() - evicted_before
    assert evicted == 5 or (settings.REDIS_URL and evicted > 5)
    reset_tracker()


def _evicted_card(admin_client) -> str:
    page = admin_client.get(reverse("admin:observability_retrievaldashboard_changelist"))
    assert page.status_code == 200
    found = re.search(r'id="card-sessions-evicted">([^<]*)<', page.content.decode())
    assert found, "the dashboard has no sessions-evicted card"
    return found.group(1)


@pytest.mark.django_db
def test_the_dashboard_shows_how_many_sessions_the_cap_evicted(settings, admin_client):
    # Given a cap of 2 sessions per agent and the count so far (Redis keeps earlier runs')
    settings.RETRIEVAL_MAX_SESSIONS_PER_AGENT = 2
    reset_tracker()
    before = sessions_evicted()
    # When one agent opens five sessions
    agent = 10_000 + uuid.uuid4().int % 1_000_000
    for i in range(5):
        get_tracker().mark_many(_key(agent, f"dash-{uuid.uuid4().hex}-{i}"), [("api", f"doc-{i}.md")])
    # Then the staff dashboard's card shows the three evictions on top of the earlier count
    assert before + 3 == sessions_evicted()
    assert int(re.sub(r"\D", "", _evicted_card(admin_client))) == before + 3
    reset_tracker()


@pytest.mark.django_db
def test_the_dashboard_shows_a_dash_when_the_action_memory_does_not_answer(admin_client, monkeypatch):
    def down() -> int:
        raise TrackerUnavailable("redis down")

    monkeypatch.setattr(shared_state, "_sessions_evicted_reader", down)
    assert _evicted_card(admin_client) == "–"
