"""Upkeep of the index: `check_index [--repair]` and the sweep of documents left PENDING.

Embedded run: eager tasks, real embedder and milvus-lite. The broker outage and the killed
worker are in tests/knowledge/test_indexing_faults.py (service-backed).
"""

import json

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

from knowledge.models import ApiDocument, DocumentChunk
from knowledge.services.documents import document_ingest
from knowledge.services.maintenance import documents_pending_requeue, index_check
from knowledge.vectorstore import ChunkVector
from tests.knowledge.test_ingestion import chunk_ids, markdown

pytestmark = pytest.mark.django_db(transaction=True)


def _vector(store, chunk_id: str) -> list[float]:
    return store.vectors([chunk_id])[chunk_id]


def _all_chunk_ids() -> set[str]:
    return {c.chunk_id for c in DocumentChunk.objects.select_related("document")}


def test_a_consistent_index_is_reported_as_such(vector_store, capsys):
    document_ingest(data=markdown("支付失败排查手册", 2), name="payment/handbook.md")
    call_command("check_index")
    out = capsys.readouterr().out
    assert "1 documents" in out and "index consistent" in out


def test_check_finds_missing_orphaned_stale_and_wrong_domain_vectors_and_repair_fixes_them(
    vector_store, capsys
):
    # Given an index that drifted from the database in every way it can
    document_ingest(data=markdown("Handbook", 3), name="payment/handbook.md")
    document_ingest(data=markdown("Refunds", 2), name="payment/refunds.md")
    document_ingest(data=markdown("Gateway", 2, domain="api"), name="api/gateway.md")
    handbook = ApiDocument.objects.get(doc_key="payment/handbook.md")
    some = _vector(vector_store, "payment/handbook.md#0")
    vector_store.delete_chunks(["payment/handbook.md#1"])  # missing
    vector_store.upsert(
        [
            ChunkVector("deleted/old.md#0", some, "payment", "deleted/old.md", 0),  # orphaned
            ChunkVector("payment/refunds.md#7", some, "payment", "payment/refunds.md", 7),  # stale
            ChunkVector("api/gateway.md#0", some, "payment", "api/gateway.md", 0),  # wrong domain
        ]
    )

    # When check_index runs without --repair
    with pytest.raises(CommandError, match="--repair"):
        call_command("check_index", "--json")
    report = json.loads(capsys.readouterr().out)

    # Then each drift is named, and nothing is changed
    assert report["ok"] is False
    assert report["missing"] == ["payment/handbook.md#1"]
    assert report["orphaned"] == ["deleted/old.md#0"]
    assert report["stale"] == ["payment/refunds.md#7"]
    assert report["wrong_domain"] == ["api/gateway.md#0"]
    assert "deleted/old.md#0" in vector_store.chunk_ids()

    # When it runs with --repair (tasks are eager here: the re-index runs at once)
    call_command("check_index", "--repair")
    out = capsys.readouterr().out
    assert "deleted 2 vectors" in out and "queued re-indexing of 2 documents" in out

    # Then Milvus holds exactly the chunks of the database, each in its document's domain
    assert vector_store.chunk_ids() == _all_chunk_ids()
    assert index_check().ok
    handbook.refresh_from_db()
    assert handbook.status == ApiDocument.Status.INDEXED
    assert vector_store.chunk_ids(doc_key="payment/handbook.md") == chunk_ids(handbook)
    hits = vector_store.search(some, top_k=20, domain="api")
    assert {h.doc_key for h in hits} == {"api/gateway.md"}


def test_documents_being_indexed_are_left_to_their_own_run(vector_store):
    document_ingest(data=markdown("Handbook", 2), name="payment/handbook.md")
    ApiDocument.objects.filter(doc_key="payment/handbook.md").update(status=ApiDocument.Status.INDEXING)
    some = _vector(vector_store, "payment/handbook.md#0")
    vector_store.upsert([ChunkVector("payment/handbook.md#5", some, "payment", "payment/handbook.md", 5)])

    report = index_check(repair=True)

    assert report.ok and report.in_flight == ["payment/handbook.md"]
    assert "payment/handbook.md#5" in vector_store.chunk_ids()


def test_check_index_names_an_unreachable_vector_store(settings):
    from knowledge.vectorstore import reset_vector_store
    from tests.conftest import free_port

    settings.MILVUS_URI, settings.MILVUS_TIMEOUT = f"http://127.0.0.1:{free_port()}", 1
    reset_vector_store()
    try:
        with pytest.raises(CommandError, match="vector store did not answer"):
            call_command("check_index")
    finally:
        reset_vector_store()


def test_the_sweep_queues_only_documents_pending_longer_than_the_threshold(vector_store, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    document_ingest(data=markdown("Handbook", 1), name="payment/handbook.md")
    document_ingest(data=markdown("Refunds", 1), name="payment/refunds.md")
    # Given two documents left PENDING (their messages lost), one of them for long
    ApiDocument.objects.update(status=ApiDocument.Status.PENDING)
    vector_store.delete_document("payment/handbook.md")
    old = django_settings.INGEST_REQUEUE_AFTER_SECONDS + 60
    from datetime import timedelta

    from django.utils import timezone

    ApiDocument.objects.filter(doc_key="payment/handbook.md").update(
        updated_at=timezone.now() - timedelta(seconds=old)
    )

    result = documents_pending_requeue()

    assert result.queued == ["payment/handbook.md"] and result.failed == []
    statuses = dict(ApiDocument.objects.values_list("doc_key", "status"))
    assert statuses == {"payment/handbook.md": "INDEXED", "payment/refunds.md": "PENDING"}
    assert vector_store.chunk_ids(doc_key="payment/handbook.md")


def test_beat_runs_the_sweep_and_the_nightly_check():
    schedule = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"knowledge.pending_documents_requeue", "knowledge.index_check"} <= schedule
    from config.celery import app

    app.loader.import_default_modules()
    assert {"knowledge.pending_documents_requeue", "knowledge.index_check"} <= set(app.tasks)
