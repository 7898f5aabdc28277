"""The lookup when the vector store hangs (service-backed run): a real `milvus-lite server`
stopped with SIGSTOP (it keeps its connections and the kernel still accepts new ones; nothing
answers), then resumed with SIGCONT.

Every lookup answers within a generous bound, keyword-only and DEGRADED; once it resumes the
lookups use it again, without a restart (the breaker lets a call through after its cooldown).
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from django.urls import reverse

from knowledge.embeddings import get_embedder
from knowledge.vectorstore import get_vector_store, reset_vector_store
from observability.models import ToolInvocation
from tests.retrieval.conftest import Corpus, seed_documents
from tests.retrieval.test_lookup_faults import MilvusServer
from tests.support.redis_settings import redis_point_at

LOOKUP = reverse("retrieval:lookup-knowledge")
pytestmark = pytest.mark.services


@pytest.fixture
def milvus(tmp_path, settings):
    server = MilvusServer(tmp_path)
    server.start()
    settings.MILVUS_URI = server.uri
    settings.MILVUS_COLLECTION = f"t_{uuid.uuid4().hex[:12]}"
    settings.MILVUS_TIMEOUT = 10
    settings.MILVUS_READ_TIMEOUT = 1.5
    settings.DEPENDENCY_BREAKER_SECONDS = 2
    reset_vector_store()
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()
        reset_vector_store()


def _timed_lookup(client, query: str):
    started = time.monotonic()
    response = client.post(LOOKUP, {"query": query, "session_id": f"s-{uuid.uuid4().hex}"}, format="json")
    took = time.monotonic() - started
    assert response.status_code == 200, response.content
    return response.json(), ToolInvocation.objects.get(public_id=response["X-Invocation-Id"]), took


@pytest.mark.django_db
def test_milvus_hung_lookups_answer_degraded_within_seconds_and_recover_after_it_resumes(
    milvus, agent_client, client
):
    embedder = get_embedder()
    store = get_vector_store()
    store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    seed_documents(Corpus(store))
    body, record, _ = _timed_lookup(agent_client, "数据库连接池配置")
    assert record.status == "SUCCESS" and body["primary"]["docKey"] == "infrastructure/mysql-pool.md"

    # Given the vector store hangs: connections open, nothing answers
    os.kill(milvus.proc.pid, signal.SIGSTOP)

    # Then every lookup answers keyword-only within the bound, saying semantic search is down
    took_each = []
    for query in ("ERR_TIMEOUT", "ERR_TIMEOUT 错误码", "如何配置数据库连接池", "ERR_TIMEOUT 超时"):
        body, record, took = _timed_lookup(agent_client, query)
        took_each.append(took)
        assert record.status == "DEGRADED", record.error
        assert "vector search unavailable" in record.error and milvus.uri in record.error
        assert "暂不可用" in body["message"]
    assert max(took_each) < 5, took_each
    # the first pays the deadline; the breaker answers for the others at once
    assert sorted(took_each)[-2] < 1.5, took_each

    # And /healthz answers 503 naming it, in bounded time
    started = time.monotonic()
    health = client.get("/healthz")
    assert time.monotonic() - started < 5
    assert health.status_code == 503 and "vector_store" in health.json()["down"]

    # When it resumes, lookups use it again after the breaker's cooldown, without a restart
    os.kill(milvus.proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 20
    while True:
        time.sleep(0.5)
        body, record, _ = _timed_lookup(agent_client, f"如何配置数据库连接池 {uuid.uuid4().hex[:4]}")
        if record.status == "SUCCESS" or time.monotonic() > deadline:
            break
    assert record.status == "SUCCESS", record.error
    assert body["primary"]["docKey"] == "infrastructure/mysql-pool.md"


@pytest.fixture
def redis_hung(settings, seeded_corpus, agent_client):
    """Action memory and the throttle's cache on a peer that accepts and never answers (a hung
    Redis), with the production clients' timeouts; the machine's Redis keeps running. One lookup
    first, on the real Redis: the first search after seeding opens the collection and the lexical
    index (what the worker's warm-up does at start), which is not what is measured here."""
    from retrieval.agents.throttling import budget_window_reset
    from retrieval.agents.tracker import reset_tracker

    _timed_lookup(agent_client, "数据库连接池")
    peer = next(_peers_in(range(22200, 22300)))
    hung = f"redis://127.0.0.1:{peer.port}/0"
    redis_point_at(settings, hung, timeout=2)
    reset_tracker()
    budget_window_reset()
    try:
        yield peer
    finally:
        peer.close()
        reset_tracker()
        budget_window_reset()


def _peers_in(ports):
    from tests.support.hung_peer import HungPeer

    for port in ports:
        try:
            yield HungPeer(port=port)
        except OSError:
            continue


@pytest.mark.django_db
def test_redis_hung_lookups_answer_memory_less_within_seconds(seeded_corpus, agent_client, redis_hung):
    # Given Redis (action memory and the throttle's cache) accepts connections and never answers
    # When an agent looks up several times (through the throttled API)
    took_each = []
    for query in ("数据库连接池配置", "ERR_TIMEOUT 错误码", "如何配置数据库连接池"):
        body, record, took = _timed_lookup(agent_client, query)
        took_each.append(took)
        # Then each gets its answer, recorded DEGRADED as when Redis is stopped: this process's
        # memory stands in for the shared one, and the record says so
        assert record.status == "DEGRADED", record.error
        assert "action memory unavailable" in record.error
        assert record.retrieval_details["action_memory"] == "memory-fallback"
        assert "暂不可用" in body["message"]
    print(f"lookups with Redis hung: {[round(t, 2) for t in took_each]} s")
    # Within the bound, every one (the machine is shared: generous); the first pays the budget
    # counter's and the action memory's socket timeouts (2 s each), their breakers the others'
    assert max(took_each) < 5, took_each
    assert sorted(took_each)[-2] < 1.5, took_each
    assert redis_hung.accepted >= 1  # it was asked, and hung
