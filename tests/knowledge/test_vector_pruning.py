"""Vectors of a deleted document when Milvus is down at the delete (service-backed run: MariaDB,
Redis, a real Celery worker, a `milvus-lite server` of this test stopped by its PID).

The delete cannot wait for Milvus: the row goes at once and the removal of its vectors is queued.
The worker retries it with backoff until Milvus answers again, and then the vectors are gone from
Milvus itself (the lookup's database filter would otherwise hide the orphans, and only the nightly
repair would find them).
"""

from __future__ import annotations

import re
import time

import pytest

from knowledge.models import ApiDocument
from knowledge.services.documents import document_delete, document_ingest
from knowledge.vectorstore import get_vector_store, reset_vector_store
from tests.knowledge.test_indexing_worker import wait_until_settled
from tests.knowledge.test_ingestion import chunk_ids, markdown
from tests.retrieval.test_lookup_faults import milvus  # noqa: F401 - the fixture

PRUNE = "Task knowledge.prune_document_vectors"
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _wait_for(log_path, text: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {text!r} in the worker log:\n{log_path.read_text()}"
        time.sleep(0.2)


def test_a_delete_while_milvus_is_down_queues_the_vector_removal_and_the_worker_does_it_once_back(
    milvus,  # noqa: F811 - first, so the worker below is started on this server
    celery_worker,
):
    # Given a document indexed by the worker into this test's Milvus
    document_ingest(data=markdown("支付失败排查手册", 3), name="payment/handbook.md")
    wait_until_settled(timeout=120)
    document = ApiDocument.objects.get(doc_key="payment/handbook.md")
    assert document.status == ApiDocument.Status.INDEXED, celery_worker.log_path.read_text()
    stored = chunk_ids(document)
    assert len(stored) == document.chunk_count >= 2
    assert get_vector_store().chunk_ids(doc_key=document.doc_key) == stored

    # When Milvus is down as the document is deleted
    milvus.stop()
    reset_vector_store()
    document_delete(document=document)

    # Then the delete itself succeeds, and the worker's first try at the vectors fails and retries
    assert not ApiDocument.objects.filter(doc_key="payment/handbook.md").exists()
    _wait_for(celery_worker.log_path, f"{PRUNE}[", timeout=60)
    _wait_for(celery_worker.log_path, "Retry in", timeout=120)

    # When Milvus is back (same data: the vectors are still there)
    milvus.start()
    reset_vector_store()

    # Then the queued removal is carried out: Milvus holds none of the document's vectors
    store = get_vector_store()
    deadline = time.monotonic() + 150
    while store.count(doc_key="payment/handbook.md") != 0:
        assert time.monotonic() < deadline, (
            f"{store.chunk_ids(doc_key='payment/handbook.md')} still in Milvus:\n"
            + celery_worker.log_path.read_text()
        )
        time.sleep(1)
    assert store.chunk_ids(doc_key="payment/handbook.md") == set()
    assert re.search(rf"{re.escape(PRUNE)}\[[0-9a-f-]+\] succeeded", celery_worker.log_path.read_text())
