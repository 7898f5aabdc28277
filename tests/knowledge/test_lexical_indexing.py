"""Indexing writes the lexical index (tantivy, the embedded default) in the same swap as the
vectors: a document's chunks go in with its vectors, a re-index replaces them, a delete removes
them, and a run that fails leaves the lexical index as the database's rows say. Real embedder,
embedded milvus-lite, a tantivy index per test (the ``vector_store`` fixture)."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from django.db import connection

from knowledge.embeddings import get_embedder
from knowledge.lexical import LexicalIndexError, get_lexical_engine, lexical_search, query_tokens
from knowledge.models import ApiDocument, DocumentChunk
from knowledge.services import indexing
from knowledge.services.documents import document_delete, document_ingest
from knowledge.services.index_status import TemporaryIndexError
from knowledge.services.indexing import document_index, documents_index
from knowledge.vectorstore import VectorStoreError
from tests.knowledge.test_ingestion import chunk_ids, markdown
from tests.knowledge.test_lexical_tantivy import _CRASHING_WRITER, _run


def lexical_ids(doc_key: str | None = None) -> set[str]:
    return get_lexical_engine().chunk_ids(doc_key=doc_key)


def search(text: str, **kwargs) -> list:
    return lexical_search(query_tokens(text), top_k=kwargs.pop("top_k", 50), **kwargs)


def ingested(name: str, sections: int, capture, **kwargs) -> ApiDocument:
    """Stored and indexed (the indexing it queues on commit runs at once, eagerly)."""
    with capture(execute=True):
        document_ingest(data=markdown(name, sections, **kwargs), name=name)
    return ApiDocument.objects.get(doc_key=name)


def uploaded(name: str, sections: int, capture, **kwargs) -> ApiDocument:
    """Stored and PENDING: the indexing it queues is held back for the test to run."""
    with capture(execute=False):
        document_ingest(data=markdown(name, sections, **kwargs), name=name)
    return ApiDocument.objects.get(doc_key=name)


@pytest.mark.django_db
def test_an_indexed_document_s_chunks_are_in_the_lexical_index_with_their_embedded_text(
    vector_store, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        document_ingest(data=markdown("支付失败排查手册", 3), name="payment/handbook.md")
    document = ApiDocument.objects.get(doc_key="payment/handbook.md")

    assert lexical_ids() == chunk_ids(document) == vector_store.chunk_ids()
    hits = search("排查手册 marker-1")
    assert hits[0].chunk_id == "payment/handbook.md#1"  # its own marker ranks it first
    first = DocumentChunk.objects.get(document=document, chunk_index=1)
    # the text Milvus's BM25 field holds: title, heading path (title dropped), chunk
    assert hits[0].text == f"支付失败排查手册\nSection 1\n{first.content}"
    assert (hits[0].doc_key, hits[0].domain, hits[0].chunk_index) == ("payment/handbook.md", "payment", 1)
    assert {h.chunk_id for h in search("section")} == chunk_ids(document)  # heading paths are indexed


@pytest.mark.django_db
def test_a_re_index_replaces_the_old_chunks_and_a_delete_removes_them(
    vector_store, django_capture_on_commit_callbacks
):
    assert len(chunk_ids(ingested("a.md", 4, django_capture_on_commit_callbacks, words="旧版本的说明。"))) > 2
    document = ingested("a.md", 1, django_capture_on_commit_callbacks, words="新版本的说明。")

    assert lexical_ids("a.md") == chunk_ids(document) == {"a.md#0"}
    assert search("旧版本") == [] and {h.chunk_id for h in search("新版本")} == chunk_ids(document)

    with django_capture_on_commit_callbacks(execute=True):
        document_delete(document=document)
    assert lexical_ids() == set() and search("新版本") == []


@pytest.mark.django_db
def test_a_document_moved_to_another_domain_is_filtered_by_its_new_domain(
    vector_store, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    ingested("gateway.md", 2, capture, domain="payment")
    ingested("other.md", 1, capture, domain="api", words="订单状态。")
    ingested("gateway.md", 2, capture, domain="api", words="网关超时。")

    assert {h.doc_key for h in search("网关 订单", domain="api")} == {"gateway.md", "other.md"}
    assert search("网关", domain="payment") == []
    assert {h.doc_key for h in search("网关 订单", domain={"payment"})} == set()
    assert {e.domain for e in get_lexical_engine().entries()} == {"api"}


@pytest.mark.django_db
def test_an_embedding_failure_on_re_upload_leaves_the_indexed_version_in_the_lexical_index(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    ingested("a.md", 3, django_capture_on_commit_callbacks, words="第一版内容。")
    before = lexical_ids("a.md")

    def broken(texts):
        raise RuntimeError("model crashed")

    monkeypatch.setattr(get_embedder(), "_encode", broken)
    ingested("a.md", 1, django_capture_on_commit_callbacks, words="第二版内容。")

    assert ApiDocument.objects.get(doc_key="a.md").status == ApiDocument.Status.FAILED
    assert lexical_ids("a.md") == before
    assert search("第二版") == [] and search("第一版")


@pytest.mark.django_db
def test_vectors_that_fail_beside_a_lexical_write_that_landed_leave_the_indexed_version_searchable(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    # The vectors are upserted from a thread while the lexical entries are written: here the
    # lexical write lands and Milvus refuses the vectors.
    ingested("a.md", 3, django_capture_on_commit_callbacks, words="第一版内容。")
    before = lexical_ids("a.md")
    document = uploaded("a.md", 1, django_capture_on_commit_callbacks, words="第二版内容。")
    wrote: list[str] = []
    real_write = indexing.documents_lexical_write

    def lexical_write(documents, **kwargs):
        real_write(documents, **kwargs)
        wrote.append(threading.current_thread().name)

    def upsert_fails(rows):
        raise VectorStoreError("Milvus upsert failed: disk quota exceeded")

    monkeypatch.setattr(indexing, "documents_lexical_write", lexical_write)
    monkeypatch.setattr(vector_store, "upsert", upsert_fails)
    with django_capture_on_commit_callbacks(execute=True):  # the queued prune runs
        result = document_index(document_id=document.id, final_attempt=True)

    document.refresh_from_db()
    assert wrote == [threading.current_thread().name]  # the lexical write landed, in the run's thread
    assert result.status == ApiDocument.Status.FAILED and "disk quota" in document.error
    # The prune queued for the failed run put the lexical index back to the chunk rows: the
    # indexed version, not the one that failed
    assert lexical_ids("a.md") == before == {c.chunk_id for c in document.chunks.all()}
    assert search("第二版") == [] and search("第一版")


@pytest.mark.django_db
def test_a_lexical_index_that_refuses_the_write_fails_the_document_and_its_vectors_go(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    document = uploaded("a.md", 2, django_capture_on_commit_callbacks)
    engine = get_lexical_engine()

    def refuse(chunks_by_doc):
        raise LexicalIndexError("the lexical index writer stayed busy for 300 s")

    monkeypatch.setattr(engine, "documents_replace", refuse)
    # not the last attempt: the document waits for the retry
    with pytest.raises(TemporaryIndexError):
        document_index(document_id=document.id, final_attempt=False)
    document.refresh_from_db()
    assert document.status == ApiDocument.Status.PENDING and "writer stayed busy" in document.error

    # the last attempt: FAILED with the reason, and no vector of it stays (the prune task runs)
    with django_capture_on_commit_callbacks(execute=True):
        result = document_index(document_id=document.id, final_attempt=True)
    document.refresh_from_db()
    assert result.status == ApiDocument.Status.FAILED
    assert document.status == ApiDocument.Status.FAILED and "writer stayed busy" in document.error
    assert vector_store.count(doc_key="a.md") == 0 and lexical_ids("a.md") == set()


@pytest.mark.django_db
def test_a_failed_swap_puts_the_indexed_version_back_in_the_lexical_index(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    old = chunk_ids(ingested("a.md", 3, django_capture_on_commit_callbacks, words="第一版内容。"))
    document = uploaded("a.md", 1, django_capture_on_commit_callbacks, words="第二版内容。")

    def rows(document_id, chunks):
        raise RuntimeError("disk full while writing chunk rows")

    monkeypatch.setattr(indexing, "chunk_rows", rows)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError, match="disk full"):
        document_index(document_id=document.id)

    document.refresh_from_db()
    assert document.status == ApiDocument.Status.FAILED
    # the rows are still the first version's, and so is the lexical index: ids and text
    assert chunk_ids(document) == old == lexical_ids("a.md")
    assert search("第二版") == [] and {h.chunk_id for h in search("第一版")} == old


@pytest.mark.django_db
def test_a_document_deleted_while_it_is_indexed_leaves_no_lexical_entry(
    vector_store, django_capture_on_commit_callbacks, monkeypatch
):
    document = uploaded("a.md", 2, django_capture_on_commit_callbacks)
    real_upsert = indexing._upsert

    def upsert_then_deleted(runs, *args, **kwargs):
        real_upsert(runs, *args, **kwargs)  # vectors and lexical entries written...
        assert lexical_ids("a.md")
        ApiDocument.objects.filter(id=document.id).delete()  # ...then the staff deletes it

    monkeypatch.setattr(indexing, "_upsert", upsert_then_deleted)
    with django_capture_on_commit_callbacks(execute=True):
        result = document_index(document_id=document.id)

    assert result.status == "gone"
    assert lexical_ids() == set() and vector_store.count() == 0


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_two_indexing_runs_at_once_both_land_in_the_lexical_index(vector_store, monkeypatch):
    # Service-backed only: the embedded run's test database is in-memory SQLite in shared-cache
    # mode, where two threads writing at once fail with "database table is locked" at once (no
    # busy wait), whatever the lexical writer does. The writer lock itself is a file lock, the
    # same with either database.
    first = uploaded_committed("first.md", 3)
    second = uploaded_committed("second.md", 3, domain="api")
    # (two first runs creating the Milvus collection at once collide in milvus-lite: not the point)
    embedder = get_embedder()
    vector_store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    # Both runs reach their lexical write together: one waits for the other's writer.
    both_ready = threading.Barrier(2, timeout=60)
    real_write = indexing.documents_lexical_write

    def write_together(documents, **kwargs):
        both_ready.wait()
        real_write(documents, **kwargs)

    monkeypatch.setattr(indexing, "documents_lexical_write", write_together)
    failures: list[BaseException] = []

    def run(document_id: int) -> None:
        try:
            documents_index(entries=[(document_id, False)], final_attempt=True)
        except BaseException as exc:  # reported by the test
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(d.id,)) for d in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert failures == []
    for document in (first, second):
        document.refresh_from_db()
        assert document.status == ApiDocument.Status.INDEXED
        assert (
            lexical_ids(document.doc_key)
            == chunk_ids(document)
            == vector_store.chunk_ids(doc_key=document.doc_key)
        )


def uploaded_committed(name: str, sections: int, **kwargs) -> ApiDocument:
    """Stored and PENDING, with no indexing run queued (a transactional test)."""
    from knowledge.tasks import indexing as tasks

    # Queued by name (config.queueing): the registered task objects, by whichever call they are sent.
    sent = [
        (task, call)
        for task in (tasks.index_document, tasks.index_documents)
        for call in ("delay", "apply_async")
    ]
    real = [getattr(task, call) for task, call in sent]
    for task, call in sent:
        setattr(task, call, lambda *a, **k: None)
    try:
        document_ingest(data=markdown(name, sections, **kwargs), name=name)
    finally:
        for (task, call), original in zip(sent, real, strict=True):
            setattr(task, call, original)
    document = ApiDocument.objects.get(doc_key=name)
    assert document.status == ApiDocument.Status.PENDING and not lexical_ids(name)
    return document


@pytest.mark.django_db
def test_after_a_writer_is_killed_mid_write_the_next_run_completes_the_document(
    vector_store, django_capture_on_commit_callbacks
):
    ingested("doc.md", 2, django_capture_on_commit_callbacks, words="第一版内容。")
    document = uploaded("doc.md", 3, django_capture_on_commit_callbacks, words="第二版内容。")
    ApiDocument.objects.filter(id=document.id).update(status=ApiDocument.Status.INDEXING)  # a run died

    # Another process was writing the index when it was killed
    engine = get_lexical_engine()
    writer = _run(_CRASHING_WRITER, str(engine.path))
    try:
        assert writer.stdout.readline().strip() == "writing", writer.stderr.read()
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(30)

    # the index still answers with the last commit
    assert lexical_ids("doc.md") == {"doc.md#0", "doc.md#1"} and search("第一版")
    # and the run the sweep queues for a document left INDEXING completes it
    with django_capture_on_commit_callbacks(execute=True):
        result = document_index(document_id=document.id, repair=True)
    document.refresh_from_db()
    assert result.status == ApiDocument.Status.INDEXED
    assert lexical_ids("doc.md") == chunk_ids(document) == vector_store.chunk_ids(doc_key="doc.md")
    assert search("第一版") == [] and {h.chunk_id for h in search("第二版")} == chunk_ids(document)
