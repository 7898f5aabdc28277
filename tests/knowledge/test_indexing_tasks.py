"""The indexing tasks' retries and time limit (embedded mode: eager Celery, real embedder and
milvus-lite; Milvus made unreachable by pointing at a closed port).

Eagerly, Celery runs a retry at once (without its countdown) and logs it as the worker does,
``retry: Retry in <countdown>s``: the test reads the delays from that log. The service-backed
run proves the same against a real worker (test_vector_pruning.py, test_indexing_faults.py).
"""

from __future__ import annotations

import logging
import re

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from config.celery import app
from knowledge.embeddings import get_embedder
from knowledge.models import ApiDocument
from knowledge.services import indexing
from knowledge.services.documents import document_ingest
from knowledge.tasks.indexing import index_document, index_documents, prune_document_vectors
from knowledge.vectorstore import ChunkVector, reset_vector_store
from tests.conftest import free_port
from tests.knowledge.test_ingestion import chunk_ids, markdown

pytestmark = pytest.mark.django_db
#: Every retry of an indexing task, 5 s doubled each time (MAX_RETRIES = 5)
BACKOFF = [5, 10, 20, 40, 80]


@pytest.fixture
def milvus_unreachable(settings):
    settings.MILVUS_URI, settings.MILVUS_TIMEOUT = f"http://127.0.0.1:{free_port()}", 1
    reset_vector_store()
    yield
    reset_vector_store()


@pytest.fixture
def not_propagated():
    """The task's own outcome, as a worker records it, instead of its exception raised here."""
    propagates, app.conf.task_eager_propagates = app.conf.task_eager_propagates, False
    yield
    app.conf.task_eager_propagates = propagates


def _retry_delays(caplog, task_name: str) -> list[int]:
    return [
        int(m.group(1))
        for r in caplog.records
        if r.name == "celery.app.trace" and task_name in r.getMessage()
        for m in [re.search(r"retry: Retry in (\d+)s", r.getMessage())]
        if m
    ]


def _stored(name: str, capture) -> ApiDocument:
    """Uploaded; its indexing (queued on commit) not run."""
    with capture():
        document_ingest(data=markdown(name, 2, words=f"{name} 的正文。"), name=name)
    return ApiDocument.objects.get(doc_key=name)


def _send_and_assert_indexed(queued, documents, vector_store, capture) -> None:
    """Send the runs a batch queued; then every document is INDEXED with exactly its chunk rows'
    vectors in Milvus."""
    with capture(execute=True):
        for send in queued:
            send()
    for document in documents:
        document.refresh_from_db()
        assert document.status == ApiDocument.Status.INDEXED
        assert vector_store.chunk_ids(doc_key=document.doc_key) == chunk_ids(document)


def test_indexing_retries_with_doubling_delays_while_milvus_is_down_then_fails_with_the_reason(
    milvus_unreachable, not_propagated, django_capture_on_commit_callbacks, caplog
):
    document = _stored("a.md", django_capture_on_commit_callbacks)
    with caplog.at_level(logging.INFO, logger="celery.app.trace"):
        result = index_document.apply(args=(document.id,))

    assert _retry_delays(caplog, "knowledge.index_document") == BACKOFF
    assert result.get() == ApiDocument.Status.FAILED  # the last try gives up, and says why
    document.refresh_from_db()
    assert document.status == ApiDocument.Status.FAILED
    assert document.error.startswith("vector store unavailable")


def test_a_batch_retries_with_the_same_delays_while_milvus_is_down_then_fails_each_with_the_reason(
    milvus_unreachable, not_propagated, django_capture_on_commit_callbacks, caplog
):
    first = _stored("a.md", django_capture_on_commit_callbacks)
    second = _stored("b.md", django_capture_on_commit_callbacks)
    with caplog.at_level(logging.INFO, logger="celery.app.trace"):
        result = index_documents.apply(args=([[first.id, False], [second.id, False]],))

    assert _retry_delays(caplog, "knowledge.index_documents") == BACKOFF
    assert result.get() == {str(first.id): "FAILED", str(second.id): "FAILED"}
    for document in (first, second):
        document.refresh_from_db()
        assert document.status == ApiDocument.Status.FAILED
        assert document.error.startswith("vector store unavailable")


def test_the_prune_task_retries_with_doubling_delays_while_milvus_is_down(
    milvus_unreachable, not_propagated, caplog
):
    with caplog.at_level(logging.INFO, logger="celery.app.trace"):
        result = prune_document_vectors.apply(args=("gone.md",))

    assert _retry_delays(caplog, "knowledge.prune_document_vectors") == BACKOFF
    assert result.failed()  # out of retries: the worker logs it; the nightly check repairs it


def test_a_document_over_the_soft_time_limit_fails_with_that_reason(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    document = _stored("a.md", django_capture_on_commit_callbacks)

    def slow_chunking(document):
        raise SoftTimeLimitExceeded()  # what Celery raises in the task when the soft limit passes

    monkeypatch.setattr(indexing, "document_chunks", slow_chunking)
    with pytest.raises(SoftTimeLimitExceeded):
        index_document.apply(args=(document.id,))

    document.refresh_from_db()
    assert document.status == ApiDocument.Status.FAILED
    assert document.error == "indexing took longer than CELERY_TASK_SOFT_TIME_LIMIT"
    assert vector_store.count(doc_key="a.md") == 0


def test_a_batch_over_the_soft_time_limit_queues_a_run_of_its_own_for_each_unfinished_document(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    documents = [_stored(name, django_capture_on_commit_callbacks) for name in ("a.md", "b.md", "c.md")]
    # b.md was indexed before and a failed run left an orphan vector: its entry asks for a repair
    with django_capture_on_commit_callbacks(execute=True):
        indexing.document_index(document_id=documents[1].id)
    orphan = ChunkVector("b.md#7", get_embedder().encode(["x"])[0].tolist(), "payment", "b.md", 7)
    vector_store.upsert([orphan])
    ApiDocument.objects.filter(id=documents[1].id).update(status=ApiDocument.Status.PENDING)
    real_sandbox = indexing.version_sandbox

    def sandbox_too_slow():
        raise SoftTimeLimitExceeded()  # the run's limit passes before any document is done

    monkeypatch.setattr(indexing, "version_sandbox", sandbox_too_slow)
    entries = [[documents[0].id, False], [documents[1].id, True], [documents[2].id, False]]
    with django_capture_on_commit_callbacks() as queued, pytest.raises(SoftTimeLimitExceeded):
        index_documents.apply(args=(entries,))
    assert len(queued) == 3  # one run each

    # When those runs go (the slow step is quick this time), every document is indexed, and the
    # orphan is gone: each run of its own repairs what the batch may have left
    monkeypatch.setattr(indexing, "version_sandbox", real_sandbox)
    _send_and_assert_indexed(queued, documents, vector_store, django_capture_on_commit_callbacks)


@pytest.mark.parametrize(
    "task", [index_document, index_documents, prune_document_vectors], ids=lambda t: t.name
)
def test_the_vector_tasks_are_acknowledged_only_once_they_have_run(task):
    # A worker killed in the middle of one leaves the message on the broker, to be run again by
    # the next worker (test_indexing_faults.py kills a real one). Safe: each is idempotent.
    assert task.acks_late is True
    assert app.conf.task_reject_on_worker_lost is True


def test_a_message_naming_only_the_document_is_a_normal_run_that_does_not_ask_milvus(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    # (a message queued by hand, `celery call knowledge.index_document --args='[id]'`, or by an
    # older release): its stale ids come from its chunk rows, as for an upload
    with django_capture_on_commit_callbacks(execute=True):
        document_ingest(data=markdown("A", 4), name="a.md")
    document = _stored("a.md", django_capture_on_commit_callbacks)  # re-uploaded shorter (2)
    asked = []
    real = vector_store.chunk_ids
    monkeypatch.setattr(vector_store, "chunk_ids", lambda **kw: asked.append(kw) or real(**kw))

    assert index_document.apply(args=(document.id,)).get() == ApiDocument.Status.INDEXED

    assert asked == []
    monkeypatch.undo()
    assert vector_store.chunk_ids(doc_key="a.md") == chunk_ids(document)


def test_a_batch_whose_embedding_passes_the_soft_time_limit_fails_no_document_and_requeues_each(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    documents = [_stored(name, django_capture_on_commit_callbacks) for name in ("a.md", "b.md")]
    real_encode = indexing._encode

    def encoding_too_slow(texts):
        raise SoftTimeLimitExceeded()  # the limit passes while the model encodes the batch

    monkeypatch.setattr(indexing, "_encode", encoding_too_slow)
    with django_capture_on_commit_callbacks() as queued, pytest.raises(SoftTimeLimitExceeded):
        index_documents.apply(args=([[d.id, False] for d in documents],))
    # Not the documents' fault: none is FAILED, each gets a run of its own
    assert not ApiDocument.objects.filter(status=ApiDocument.Status.FAILED).exists()
    assert len(queued) == 2

    monkeypatch.setattr(indexing, "_encode", real_encode)
    _send_and_assert_indexed(queued, documents, vector_store, django_capture_on_commit_callbacks)
