"""The lookup when its parts fail (service-backed run): a real `milvus-lite server` stopped by its
PID and started again, and Redis (action memory, throttle cache) pointed at a closed port.

What an agent and an operator see: 200 answers, never a 500; the invocation recorded as
DEGRADED with the reason; /healthz naming the part that is down; recovery without a restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.urls import reverse
from pymilvus import MilvusClient

from knowledge.embeddings import get_embedder
from knowledge.lexical import get_lexical_engine
from knowledge.vectorstore import get_vector_store, reset_vector_store
from observability.models import ToolInvocation
from retrieval.agents.tracker import reset_tracker
from tests.conftest import free_port, wait_for_port
from tests.retrieval.conftest import Corpus, seed_documents
from tests.support.redis_settings import redis_point_at

LOOKUP = reverse("retrieval:lookup-knowledge")
pytestmark = pytest.mark.services


class MilvusServer:
    """A `milvus-lite server` of this test alone: one port and data folder across restarts."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.killed = False

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        if self.killed:
            self._forget_index_sidecars()
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "milvus-lite"),
                "server",
                "--data-dir",
                str(self.folder / "data"),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        wait_for_port(self.port, proc=self.proc)

    def stop(self) -> None:
        """Stop it by its PID, as an operator (or the OOM killer) would."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
            self.killed = True

    def _forget_index_sidecars(self) -> None:
        """Delete the index files milvus-lite keeps beside each segment; it rebuilds them on load.

        milvus-lite writes them in place from a background thread after a flush, so a kill in that
        moment leaves a truncated file that it then refuses to load for good ("No data left in
        file"; seen on a loaded machine). The data itself (segments, WAL, manifest) is written
        atomically and stays: these tests are about agentkb meeting a Milvus that went away and
        came back, not about milvus-lite's own crash recovery.
        """
        for sidecar in (self.folder / "data").rglob("*"):
            if sidecar.suffix in (".idx", ".sidx") and sidecar.is_file():
                sidecar.unlink()


@pytest.fixture
def milvus(tmp_path, settings):
    server = MilvusServer(tmp_path)
    server.start()
    settings.MILVUS_URI = server.uri
    settings.MILVUS_COLLECTION = f"t_{uuid.uuid4().hex[:12]}"
    settings.MILVUS_TIMEOUT = 3
    reset_vector_store()
    try:
        yield server
    finally:
        server.stop()
        reset_vector_store()


def _lookup(client, query: str, session_id: str):
    response = client.post(LOOKUP, {"query": query, "session_id": session_id}, format="json")
    assert response.status_code == 200, response.content
    record = ToolInvocation.objects.get(public_id=response["X-Invocation-Id"])
    return response.json(), record


@pytest.mark.django_db
def test_milvus_stopped_then_restarted_lookups_degrade_to_keywords_and_recover(
    milvus, agent_client, client, admin_client
):
    embedder = get_embedder()
    store = get_vector_store()
    store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    seed_documents(Corpus(store))
    body, record = _lookup(agent_client, "数据库连接池配置", f"s-{uuid.uuid4().hex}")
    assert record.status == "SUCCESS" and body["primary"]["docKey"] == "infrastructure/mysql-pool.md"

    # Given the vector store is stopped (killed by its PID)
    milvus.stop()

    # Then /healthz is 503 and names the vector store; to staff (never to a token), the address
    # it cannot reach
    assert client.get("/healthz").json()["checks"]["vector_store"] == {"ok": False}
    assert agent_client.get("/healthz").json()["checks"]["vector_store"] == {"ok": False}
    health = admin_client.get("/healthz")
    assert health.status_code == 503
    # With Milvus's own BM25 as the lexical engine, the lexical index is down with it.
    in_milvus = get_lexical_engine().name == "milvus"
    assert health.json()["down"] == ["vector_store"] + (["lexical_index"] if in_milvus else [])
    assert milvus.uri in health.json()["checks"]["vector_store"]["error"]

    # And a lookup still answers 200 from the keyword index, saying semantic search is unavailable
    body, record = _lookup(agent_client, "ERR_TIMEOUT", f"s-{uuid.uuid4().hex}")
    assert body["found"] is True and body["primary"]["docKey"] == "api/error-codes.md"
    assert "语义检索（semantic search" in body["message"] and "暂不可用" in body["message"]
    assert record.status == "DEGRADED"
    assert "vector search unavailable" in record.error and milvus.uri in record.error
    assert record.retrieval_details["vector_search"] == "unavailable"
    assert record.retrieval_details["l1_candidates"] == []
    # A question only the vectors can answer (and not asked before: answers are cached per
    # corpus version) is not found meanwhile, and says why.
    body, record = _lookup(agent_client, "如何配置数据库连接池", f"s-{uuid.uuid4().hex}")
    assert record.status == "DEGRADED" and body["found"] is False and "暂不可用" in body["message"]

    # When Milvus is started again on the same data (its collection comes back "released": not
    # loaded for search), the same process recovers: no restart
    milvus.start()
    raw = MilvusClient(uri=milvus.uri, dedicated=True)
    try:
        assert raw.get_load_state(store.collection)["state"].name == "NotLoad"
    finally:
        raw.close()
    assert client.get("/healthz").status_code == 200
    body, record = _lookup(agent_client, "如何配置数据库连接池", f"s-{uuid.uuid4().hex}")
    assert record.status == "SUCCESS", record.error
    assert body["primary"]["docKey"] == "infrastructure/mysql-pool.md"
    # (PRECISE or HIGHLY_RELEVANT: the level model's band for a strong match, whichever)
    assert body["relevanceLevel"] in ("PRECISE", "HIGHLY_RELEVANT") and "暂不可用" not in body["message"]
    assert record.retrieval_details["vector_search"] == "ok"


@pytest.fixture
def redis_down(settings):
    """Action memory and cache on a closed port (the machine's Redis keeps running)."""
    closed = f"redis://127.0.0.1:{free_port()}/0"
    redis_point_at(settings, closed, timeout=1)
    reset_tracker()
    yield closed
    reset_tracker()


@pytest.mark.django_db
def test_redis_unreachable_lookups_answer_on_this_processs_memory_as_degraded(
    seeded_corpus, agent_client, redis_down, session_id
):
    # Given Redis (action memory and the throttle's cache) does not answer
    # When an agent looks up (through the throttled API)
    body, record = _lookup(agent_client, "数据库连接池配置", session_id)

    # Then it gets its answer, recorded as DEGRADED under the fallback policy
    assert body["primary"]["docKey"] == "infrastructure/mysql-pool.md"
    assert body["retrievedDomainsThisSession"] == ["infrastructure"]
    assert record.status == "DEGRADED" and "action memory unavailable" in record.error
    assert record.retrieval_details["action_memory"] == "memory-fallback"
    assert any("this process's memory" in reason for reason in record.retrieval_details["degraded"])

    # And the process's own memory keeps the session: the same question is not answered twice
    again, record = _lookup(agent_client, "数据库连接池配置", session_id)
    assert again["found"] is False and again["relevanceLevel"] == "DEDUPED"
    assert "infrastructure/mysql-pool.md" in record.retrieval_details["withheld_doc_keys"]

    # And the session endpoints say the shared memory is unavailable (503 with a code, not a 500)
    response = agent_client.get(reverse("retrieval:session-retrievals", args=[session_id]))
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "action_memory_unavailable"
