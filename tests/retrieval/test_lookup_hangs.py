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
