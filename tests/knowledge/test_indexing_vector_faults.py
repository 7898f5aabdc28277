"""What an indexing run leaves in Milvus when a step after the embedding goes wrong (embedded mode:
real embedder, a `milvus-lite server` of this test stopped by its PID and started again, eager
Celery; Milvus itself counted).

- Milvus down when the old version's surplus vectors are pruned: the new version is INDEXED (its
  vectors and rows are in), and the prune is queued on commit and carried out once Milvus is back.
- The document deleted while it is indexed: the vectors the run wrote are deleted too.
- An unexpected error in the upsert: every document of the batch fails with the reason, each gets
  a prune queued for whatever part of the batch landed, and a run of one document re-raises it
  for the worker's log.
- A swap that fails: the document ends FAILED with the reason and its new vectors go, in a batch
  (the others indexed, even when that clean-up fails too) and in a run of one document (which
  re-raises the error only after the failure is committed).
- A batch prunes each document its own way (stale ids known from the old rows, or a repair that
  asks Milvus), and the run's phase timings are durations inside the run.

The commit's callbacks (what ``transaction.on_commit`` runs) are held and run by the test, so
"queued" is what the commit would send and "carried out" is that task running.
"""

from __future__ import annotations

import logging
import time

import pytest

from knowledge.embeddings import get_embedder
from knowledge.models import ApiDocument
from knowledge.services import indexing
from knowledge.services.documents import document_ingest
from knowledge.services.indexing import document_index
from knowledge.vectorstore import ChunkVector, VectorStoreError, get_vector_store, reset_vector_store
from tests.knowledge.test_ingestion import chunk_ids, markdown
from tests.knowledge.test_vector_prune_queue import eventually_held, prune_sends
from tests.retrieval.test_lookup_faults import milvus  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def _indexed(name: str, sections: int, capture) -> ApiDocument:
    with capture(execute=True):
        document_ingest(data=markdown("A", sections, words=f"{name} 的正文。"), name=name)
    document = ApiDocument.objects.get(doc_key=name)
    assert document.status == ApiDocument.Status.INDEXED
    return document


def _uploaded(name: str, sections: int, capture, words: str = "新版本的正文。") -> ApiDocument:
    """Stored, its indexing not yet run (the test runs it)."""
    with capture():
        document_ingest(data=markdown("A", sections, words=words), name=name)
    return ApiDocument.objects.get(doc_key=name)


@pytest.mark.parametrize("repair", [False, True], ids=["known-stale-ids", "repair-asks-milvus"])
def test_milvus_down_at_the_prune_leaves_the_new_version_indexed_and_the_prune_queued_until_it_is_back(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
    monkeypatch,
    caplog,
    repair,
):
    # Given a document indexed with 5 sections, re-uploaded with 1
    old = chunk_ids(_indexed("a.md", 5, django_capture_on_commit_callbacks))
    document = _uploaded("a.md", 1, django_capture_on_commit_callbacks)

    # When Milvus goes down after the new vectors are in and the swap is done, before the prune
    real_prune = indexing._prune

    def milvus_dies_then_prune(runs, timings):
        milvus.stop()
        reset_vector_store()
        real_prune(runs, timings)

    monkeypatch.setattr(indexing, "_prune", milvus_dies_then_prune)
    with caplog.at_level(logging.WARNING), django_capture_on_commit_callbacks() as queued:
        result = document_index(document_id=document.id, repair=repair)

    # Then the new version is INDEXED, nothing counted as deleted, and the prune is queued
    document.refresh_from_db()
    new = chunk_ids(document)
    assert result.status == ApiDocument.Status.INDEXED and result.stale_deleted == 0
    assert document.status == ApiDocument.Status.INDEXED and len(new) < len(old)
    assert len(prune_sends(queued)) == 1
    # And the log says so, with Milvus's error for the operator
    (warning,) = [r for r in caplog.records if "could not delete stale vectors" in r.getMessage()]
    assert warning.exc_info and issubclass(warning.exc_info[0], VectorStoreError)

    # When Milvus is back: the surplus is still there until the queued prune runs
    milvus.start()
    reset_vector_store()
    store = get_vector_store()
    eventually_held(store, "a.md", old)
    prune_sends(queued)[0]()
    eventually_held(store, "a.md", new)


def test_a_document_deleted_while_it_is_indexed_leaves_none_of_the_vectors_the_run_wrote(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    document = _uploaded("a.md", 3, django_capture_on_commit_callbacks)
    written = []
    real_upsert = indexing._upsert

    def upsert_then_deleted(runs, *args, **kwargs):
        real_upsert(runs, *args, **kwargs)
        written.append(get_vector_store().count(doc_key="a.md"))
        # deleted by staff meanwhile (its own removal of the vectors ran before they were written)
        ApiDocument.objects.filter(id=document.id).delete()

    monkeypatch.setattr(indexing, "_upsert", upsert_then_deleted)
    with django_capture_on_commit_callbacks(execute=True):
        result = document_index(document_id=document.id)

    assert result.status == "gone"
    assert written[0] >= 3 and result.stale_deleted == written[0]
    assert get_vector_store().count(doc_key="a.md") == 0


def test_an_unexpected_upsert_error_fails_each_document_of_the_batch_and_queues_their_prune(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    first = _uploaded("a.md", 2, django_capture_on_commit_callbacks)
    second = _uploaded("b.md", 2, django_capture_on_commit_callbacks)

    def rows_fail(*args, **kwargs):
        raise RuntimeError("row builder broke")

    monkeypatch.setattr(indexing, "chunk_vectors", rows_fail)
    with django_capture_on_commit_callbacks() as queued:
        batch = indexing.documents_index(
            entries=[(first.id, False), (second.id, False)], final_attempt=True
        )  # no raise

    for document in (first, second):
        document.refresh_from_db()
        assert batch.results[document.id].status == ApiDocument.Status.FAILED
        assert document.status == ApiDocument.Status.FAILED and "row builder broke" in document.error
        assert document.chunks.count() == 0
    assert len(prune_sends(queued)) == 2
    for send in prune_sends(queued):
        send()
    assert get_vector_store().count() == 0


def test_an_unexpected_upsert_error_in_a_run_of_one_document_is_raised_for_the_worker_log(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    document = _uploaded("a.md", 2, django_capture_on_commit_callbacks)

    def rows_fail(*args, **kwargs):
        raise RuntimeError("row builder broke")

    monkeypatch.setattr(indexing, "chunk_vectors", rows_fail)
    with django_capture_on_commit_callbacks() as queued, pytest.raises(RuntimeError, match="row builder"):
        document_index(document_id=document.id)

    document.refresh_from_db()
    assert document.status == ApiDocument.Status.FAILED and "row builder broke" in document.error
    assert len(prune_sends(queued)) == 1


def test_a_failed_clean_up_after_a_failed_swap_is_logged_and_the_rest_of_the_batch_is_indexed(
    vector_store, django_capture_on_commit_callbacks, monkeypatch, caplog
):
    good = _uploaded("a.md", 2, django_capture_on_commit_callbacks)
    bad = _uploaded("b.md", 2, django_capture_on_commit_callbacks)
    real_rows = indexing.chunk_rows

    def rows(document_id, chunks):
        if document_id == bad.id:
            raise RuntimeError("disk full while writing chunk rows")
        return real_rows(document_id, chunks)

    def clean_up_fails(*, doc_key):
        raise RuntimeError(f"the clean-up of {doc_key} broke too")

    monkeypatch.setattr(indexing, "chunk_rows", rows)
    monkeypatch.setattr(indexing, "document_vectors_prune_or_queue", clean_up_fails)
    with caplog.at_level(logging.ERROR), django_capture_on_commit_callbacks(execute=True):
        batch = indexing.documents_index(
            entries=[(good.id, False), (bad.id, False)], final_attempt=True
        )  # no raise

    assert batch.results[good.id].status == ApiDocument.Status.INDEXED
    assert batch.results[bad.id].status == ApiDocument.Status.FAILED
    bad.refresh_from_db()
    assert bad.status == ApiDocument.Status.FAILED and "disk full" in bad.error
    assert f"could not record the failure of document {bad.id}" in [r.getMessage() for r in caplog.records]
    assert vector_store.chunk_ids(doc_key="a.md") == chunk_ids(good)


def test_a_failed_swap_in_a_run_of_one_document_is_raised_and_its_new_vectors_go(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    document = _uploaded("a.md", 2, django_capture_on_commit_callbacks)

    def rows(document_id, chunks):
        raise RuntimeError("disk full while writing chunk rows")

    monkeypatch.setattr(indexing, "chunk_rows", rows)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError, match="disk full"):
        document_index(document_id=document.id)

    document.refresh_from_db()
    assert document.status == ApiDocument.Status.FAILED and "disk full" in document.error
    assert vector_store.count(doc_key="a.md") == 0


def test_a_run_reports_each_phase_s_seconds_and_its_parts_and_they_add_up_to_no_more_than_the_run(
    vector_store, django_capture_on_commit_callbacks
):
    _indexed("warm.md", 1, django_capture_on_commit_callbacks)  # the model loaded before timing
    document = _indexed("a.md", 4, django_capture_on_commit_callbacks)
    shorter = _uploaded("a.md", 1, django_capture_on_commit_callbacks)  # a prune to time

    started = time.perf_counter()
    result = document_index(document_id=shorter.id)
    wall = time.perf_counter() - started

    assert result.status == ApiDocument.Status.INDEXED and result.stale_deleted > 0
    phases = {k: v for k, v in result.timings.items() if "." not in k}
    parts = {k: v for k, v in result.timings.items() if "." in k}
    assert set(phases) == {"chunk_s", "embed_s", "upsert_s", "commit_s", "prune_s"}
    assert set(parts) == {"upsert.analysis_wait_s", "upsert.lexical_write_s", "upsert.vectors_wait_s"}
    assert all(0 <= seconds <= wall for seconds in result.timings.values()), (result.timings, wall)
    assert sum(phases.values()) <= wall, (result.timings, wall)
    # a phase's parts are counted in it already
    assert sum(parts.values()) <= phases["upsert_s"], result.timings
    assert vector_store.chunk_ids(doc_key="a.md") == chunk_ids(document)


def test_a_batch_prunes_both_a_re_upload_s_surplus_and_a_repaired_document_s_orphans(
    vector_store, django_capture_on_commit_callbacks
):
    shrunk = _indexed("a.md", 4, django_capture_on_commit_callbacks)
    repaired = _indexed("b.md", 1, django_capture_on_commit_callbacks)
    _uploaded("a.md", 1, django_capture_on_commit_callbacks)  # its stale ids known from its rows
    # b.md: an orphan vector an earlier run left (only Milvus knows it: a repair asks)
    orphan = ChunkVector("b.md#7", get_embedder().encode(["x"])[0].tolist(), "payment", "b.md", 7)
    vector_store.upsert([orphan])

    with django_capture_on_commit_callbacks(execute=True):
        batch = indexing.documents_index(
            entries=[(shrunk.id, False), (repaired.id, True)], final_attempt=True
        )

    assert batch.results[shrunk.id].stale_deleted > 0
    assert batch.results[repaired.id].stale_deleted == 1
    assert vector_store.chunk_ids(doc_key="a.md") == chunk_ids(shrunk)
    assert vector_store.chunk_ids(doc_key="b.md") == chunk_ids(repaired)


def test_a_failure_before_the_upsert_leaves_milvus_alone_and_queues_no_clean_up(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    document = _uploaded("a.md", 2, django_capture_on_commit_callbacks)

    def chunking_fails(document):
        raise RuntimeError("chunker broke")

    monkeypatch.setattr(indexing, "document_chunks", chunking_fails)
    # Milvus down: a clean-up that asked it would be queued for later
    milvus.stop()
    reset_vector_store()
    with django_capture_on_commit_callbacks() as queued, pytest.raises(RuntimeError, match="chunker"):
        document_index(document_id=document.id)

    document.refresh_from_db()
    assert document.status == ApiDocument.Status.FAILED and "chunker broke" in document.error
    assert prune_sends(queued) == []  # nothing of this run reached Milvus: nothing to clean up
