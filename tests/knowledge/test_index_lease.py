"""The indexing lease: a run renews it while it works; the sweep queues at once a document whose
run's lease lapsed (the worker died), and leaves alone one whose lease is live.

Embedded run: real embedder and milvus-lite; eager tasks where a test lets the sweep's run go
through. The real worker killed mid-run is in tests/knowledge/test_indexing_faults.py.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.models import ApiDocument
from knowledge.services import indexing, maintenance
from knowledge.services.documents import document_ingest
from knowledge.services.maintenance import RUN_DIED, documents_pending_requeue, index_check
from knowledge.vectorstore import ChunkVector
from tests.knowledge.test_ingestion import chunk_ids, markdown

pytestmark = pytest.mark.django_db(transaction=True)

INDEXING = ApiDocument.Status.INDEXING


class RecordingTask:
    """Stands for the indexing task in the sweep: records what would be queued, runs nothing."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, bool]] = []

    def delay(self, document_id: int, repair: bool = False) -> None:
        self.sent.append((document_id, repair))


@pytest.fixture
def queued(monkeypatch) -> RecordingTask:
    task = RecordingTask()
    monkeypatch.setattr(maintenance, "registered_task", lambda name: task)
    return task


def _died_mid_run(doc_key: str, *, lease_ago: float) -> ApiDocument:
    """The document as a run that died leaves it: INDEXING, its lease ``lease_ago`` s in the past
    (negative: still ahead, the run alive)."""
    ApiDocument.objects.filter(doc_key=doc_key).update(
        status=INDEXING, index_lease_until=timezone.now() - timedelta(seconds=lease_ago)
    )
    return ApiDocument.objects.get(doc_key=doc_key)


def test_a_lapsed_lease_is_requeued_by_the_sweep_at_once_and_indexed_exactly_once(
    vector_store, settings, monkeypatch
):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    document_ingest(data=markdown("Handbook", 3), name="payment/handbook.md")
    # Given a run that died a moment ago, mid-way: its lease lapsed 1 s ago, the status was set
    # seconds ago (long before the old rule's wait plus the task time limit), and it had written
    # a vector that no chunk row backs
    document = _died_mid_run("payment/handbook.md", lease_ago=1)
    some = vector_store.vectors(["payment/handbook.md#0"])["payment/handbook.md#0"]
    vector_store.upsert([ChunkVector("payment/handbook.md#9", some, "payment", "payment/handbook.md", 9)])
    runs: list[list[tuple[int, bool]]] = []
    real = indexing.documents_index

    def counted(*, entries, final_attempt):
        runs.append(list(entries))
        return real(entries=entries, final_attempt=final_attempt)

    monkeypatch.setattr(indexing, "documents_index", counted)

    # When the sweep runs (its PENDING rule would wait INGEST_REQUEUE_AFTER_SECONDS), and again
    first = documents_pending_requeue()
    second = documents_pending_requeue()

    # Then the document was queued by the first sweep alone, as a repair run, and indexed once
    assert first.queued == ["payment/handbook.md"] and second.queued == []
    assert runs == [[(document.pk, True)]]
    document.refresh_from_db()
    assert document.status == ApiDocument.Status.INDEXED and document.error == ""
    assert document.index_lease_until is None
    # With nothing lost or left behind: Milvus holds exactly its chunk rows
    assert vector_store.chunk_ids(doc_key=document.doc_key) == chunk_ids(document)
    assert vector_store.count(doc_key=document.doc_key) == document.chunk_count
    assert index_check().ok


def test_a_live_lease_is_left_to_its_run(vector_store, queued):
    document_ingest(data=markdown("Handbook", 1), name="payment/handbook.md")
    # Given a run still alive: INDEXING, its lease 30 s ahead, even with a status set long ago
    document = _died_mid_run("payment/handbook.md", lease_ago=-30)
    ApiDocument.objects.filter(pk=document.pk).update(updated_at=timezone.now() - timedelta(days=1))

    result = documents_pending_requeue()

    assert result.queued == [] and queued.sent == []
    document.refresh_from_db()
    assert document.status == INDEXING


def test_a_document_queued_again_is_not_queued_by_every_sweep_while_it_waits(vector_store, queued, settings):
    document_ingest(data=markdown("Handbook", 1), name="payment/handbook.md")
    document_ingest(data=markdown("Refunds", 1), name="payment/refunds.md")
    # Given a run that died (lapsed lease) and a document PENDING for long (its message lost)
    died = _died_mid_run("payment/handbook.md", lease_ago=5)
    ApiDocument.objects.filter(doc_key="payment/refunds.md").update(
        status=ApiDocument.Status.PENDING,
        updated_at=timezone.now() - timedelta(seconds=settings.INGEST_REQUEUE_AFTER_SECONDS + 1),
    )
    lost = ApiDocument.objects.get(doc_key="payment/refunds.md")

    # When the sweep runs, and runs again before a worker took either message
    first = documents_pending_requeue()
    second = documents_pending_requeue()

    # Then each was queued once (the dead run's as a repair run)
    assert sorted(first.queued) == ["payment/handbook.md", "payment/refunds.md"] and second.queued == []
    assert sorted(queued.sent) == sorted([(died.pk, True), (lost.pk, False)])
    # And the dead run's document says why it waits again (in the admin), with no lease
    died.refresh_from_db()
    assert (died.status, died.error, died.index_lease_until) == (ApiDocument.Status.PENDING, RUN_DIED, None)


def test_a_run_takes_the_lease_and_renews_it_while_it_works(vector_store, settings, monkeypatch):
    settings.INDEX_LEASE_SECONDS, settings.INDEX_LEASE_RENEW_SECONDS = 1.0, 0.1
    document_ingest(data=markdown("Handbook", 1), name="payment/handbook.md")
    document = ApiDocument.objects.get(doc_key="payment/handbook.md")
    seen: list = []
    real = indexing._encode

    def slow_encode(texts):
        # A long embedding step (one call the run cannot interrupt): 2.5 leases long
        seen.append(ApiDocument.objects.get(pk=document.pk).index_lease_until)
        time.sleep(2.5)
        seen.append(ApiDocument.objects.get(pk=document.pk).index_lease_until)
        return real(texts)

    monkeypatch.setattr(indexing, "_encode", slow_encode)

    started = timezone.now()
    result = indexing.document_index(document_id=document.pk)

    # The run took a lease when it marked the document INDEXING ...
    taken, late = seen
    assert taken is not None and taken > started
    # ... and kept it ahead of the clock through a step longer than the lease itself
    assert late > taken + timedelta(seconds=1.5)
    # Then released it with the result
    document.refresh_from_db()
    assert result.status == ApiDocument.Status.INDEXED and document.index_lease_until is None


def test_a_lease_renewed_less_often_than_twice_per_lease_is_refused_at_start():
    from tests.config.test_settings import _django_setup

    result = _django_setup({"INDEX_LEASE_SECONDS": "10", "INDEX_LEASE_RENEW_SECONDS": "6"})
    assert result.returncode != 0
    assert "INDEX_LEASE_RENEW_SECONDS must be at most half of INDEX_LEASE_SECONDS" in result.stderr
    assert _django_setup({"INDEX_LEASE_SECONDS": "10", "INDEX_LEASE_RENEW_SECONDS": "5"}).returncode == 0


@pytest.mark.django_db
def test_a_run_marks_its_documents_indexing_by_version_a_few_queries_a_hundred(settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from knowledge.services.index_status import documents_indexing_started

    # Given 230 stored documents, one of which was re-uploaded after the run read it
    ApiDocument.objects.bulk_create(
        ApiDocument(doc_key=f"d{i}.md", title="t", domain="d", content="x", content_hash=f"h{i}", error="old")
        for i in range(230)
    )
    versions = dict(ApiDocument.objects.values_list("id", "content_hash"))
    replaced = min(versions)
    ApiDocument.objects.filter(id=replaced).update(content_hash="newer")

    with CaptureQueriesContext(connection) as queries:
        started = documents_indexing_started(versions)

    # Then every other one is INDEXING under a lease, its old error cleared, in two queries a hundred
    assert started == set(versions) - {replaced}
    assert len(queries.captured_queries) == 6
    rows = ApiDocument.objects.exclude(id=replaced)
    assert set(rows.values_list("status", "error")) == {(ApiDocument.Status.INDEXING, "")}
    assert not rows.filter(index_lease_until__lte=timezone.now()).exists()
    # and the re-uploaded one is left to its own run
    left = ApiDocument.objects.get(id=replaced)
    assert (left.status, left.error, left.index_lease_until) == (ApiDocument.Status.PENDING, "old", None)
