"""Vectors Milvus cannot delete now are queued, not lost (embedded mode: a `milvus-lite server` of
this test stopped by its PID and started again, eager Celery, Milvus itself counted).

A prune or removal that finds Milvus down queues ``knowledge.prune_document_vectors`` once the
transaction commits. Here the commit's callbacks are held until Milvus is back, as the worker's
retries hold the task in the service-backed run (tests/knowledge/test_vector_pruning.py, which
also proves the retry with backoff); then the queued task deletes them. When the task queue itself
refuses the message, the commit still stands and the failure is logged with the document's key
(the nightly repair finds the orphans).
"""

from __future__ import annotations

import logging
import time

import pytest

from config.celery import app
from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
from knowledge.services.documents import document_delete
from knowledge.services.vectors import document_vectors_prune_or_queue
from knowledge.vectorstore import ChunkVector, VectorStoreError, get_vector_store, reset_vector_store
from tests.conftest import free_port
from tests.knowledge.test_indexing_faults import broker_at
from tests.knowledge.test_vector_prune_counts import DIM, _vectors
from tests.knowledge.test_vector_prune_counts import _document_with_rows as document_with_rows
from tests.retrieval.test_lookup_faults import milvus  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db
QUEUE_REFUSED = "could not queue removal of the vectors of a.md"


def _ids(doc_key: str, indexes) -> set[str]:
    return {chunk_id_for(doc_key, i) for i in indexes}


def _document_with_rows(doc_key: str, indexes) -> ApiDocument:
    return document_with_rows(doc_key, indexes, status=ApiDocument.Status.INDEXED)


def _store_with(vectors: list[ChunkVector]):
    store = get_vector_store()
    store.ensure_collection(dim=DIM, model_name="unit-test")
    store.upsert(vectors)
    return store


def _restart(server):
    server.start()
    reset_vector_store()
    return get_vector_store()


def prune_sends(callbacks) -> list:
    """The queued sends of the pruning task among a commit's callbacks (a delete also queues the
    regeneration of its domain's summary)."""
    return [c for c in callbacks if c.__qualname__.startswith("vectors_prune_queue.")]


def eventually_held(store, doc_key: str, expected: set[str], *, timeout: float = 20.0) -> None:
    """Milvus holds exactly ``expected`` for ``doc_key``. A server restarted after a kill replays
    its log in the background, so its answers may lag for a moment: asked until the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            held = store.chunk_ids(doc_key=doc_key)
        except VectorStoreError as exc:
            # Mid-replay a restarted server may refuse to load the collection for a moment
            # (seen under load: "released", then an index file not yet readable).
            held = exc
        if held == expected:
            return
        assert time.monotonic() < deadline, f"Milvus holds {held!r}, expected {sorted(expected)}"
        time.sleep(0.5)


def _assert_warned(caplog, message: str) -> None:
    (warning,) = [r for r in caplog.records if r.getMessage() == message]
    assert warning.exc_info and issubclass(warning.exc_info[0], VectorStoreError)


def _stop(server) -> None:
    server.stop()
    reset_vector_store()


def test_a_prune_milvus_takes_now_deletes_now_counts_them_and_queues_nothing(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    _document_with_rows("a.md", range(2))
    store = _store_with(_vectors("a.md", range(4)))
    with django_capture_on_commit_callbacks() as queued:
        assert document_vectors_prune_or_queue(doc_key="a.md") == 2
    assert queued == []
    assert store.chunk_ids(doc_key="a.md") == _ids("a.md", range(2))


def test_a_prune_while_milvus_is_down_is_queued_and_carried_out_once_it_is_back(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
    caplog,
):
    # Given a document with 2 chunk rows and 4 vectors (2 no row backs), and another document
    _document_with_rows("a.md", range(2))
    _store_with(_vectors("a.md", range(4)) + _vectors("b.md", range(1)))

    # When Milvus is down as the surplus is pruned
    _stop(milvus)
    with caplog.at_level(logging.WARNING), django_capture_on_commit_callbacks() as queued:
        # Then nothing is deleted now (the count says so) and no error reaches the caller
        assert document_vectors_prune_or_queue(doc_key="a.md") == 0
    # And the prune is queued for the commit: one message
    assert len(prune_sends(queued)) == len(queued) == 1
    # And the log names the document, with Milvus's error for the operator
    _assert_warned(caplog, "could not delete stale vectors of a.md now; queued")

    # When Milvus is back (same data: the surplus is still there) and the queued task runs
    store = _restart(milvus)
    eventually_held(store, "a.md", _ids("a.md", range(4)))
    queued[0]()

    # Then Milvus holds the rows' vectors only; the other document's are untouched
    eventually_held(store, "a.md", _ids("a.md", range(2)))
    assert store.chunk_ids(doc_key="b.md") == _ids("b.md", range(1))


def test_a_delete_while_milvus_is_down_queues_the_removal_and_it_is_done_once_milvus_is_back(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
    caplog,
):
    document = _document_with_rows("a.md", range(3))
    _store_with(_vectors("a.md", range(3)) + _vectors("b.md", range(2)))

    with django_capture_on_commit_callbacks() as on_delete:
        document_delete(document=document)
    # The row and its chunks are gone at once
    assert not ApiDocument.objects.filter(doc_key="a.md").exists()
    assert not DocumentChunk.objects.filter(document__doc_key="a.md").exists()

    # When the delete commits while Milvus is down, the removal of the vectors is queued
    _stop(milvus)
    with caplog.at_level(logging.WARNING), django_capture_on_commit_callbacks() as queued:
        for callback in on_delete:
            callback()
    assert len(prune_sends(queued)) == 1
    _assert_warned(caplog, "Milvus unavailable; removal of the vectors of a.md queued")

    # And once Milvus is back the queued task removes every vector of the document, and only those
    store = _restart(milvus)
    eventually_held(store, "a.md", _ids("a.md", range(3)))
    prune_sends(queued)[0]()
    eventually_held(store, "a.md", set())
    assert store.chunk_ids(doc_key="b.md") == _ids("b.md", range(2))


def test_a_prune_the_task_queue_refuses_is_logged_and_the_commit_still_stands(
    milvus,  # noqa: F811
    django_capture_on_commit_callbacks,
    caplog,
):
    _document_with_rows("a.md", range(1))
    _store_with(_vectors("a.md", range(3)))
    _stop(milvus)
    with django_capture_on_commit_callbacks() as queued:
        assert document_vectors_prune_or_queue(doc_key="a.md") == 0
    assert len(queued) == 1

    # When the commit sends the task to a broker that does not answer
    eager, app.conf.task_always_eager = app.conf.task_always_eager, False
    try:
        with broker_at(f"redis://127.0.0.1:{free_port()}/0"), caplog.at_level(logging.ERROR):
            queued[0]()  # Then the commit's callback does not raise
    finally:
        app.conf.task_always_eager = eager

    # And the refusal is logged, naming the document whose vectors stay behind
    refused = [r for r in caplog.records if r.getMessage() == QUEUE_REFUSED]
    assert len(refused) == 1 and refused[0].exc_info is not None
    eventually_held(_restart(milvus), "a.md", _ids("a.md", range(3)))
