"""The ingestion services end to end (embedded mode: eager tasks, real embedder, real milvus-lite):
store, index, re-upload, delete, failures. Vectors are counted in Milvus itself."""

import numpy as np
import pytest

from knowledge.embeddings import get_embedder, reset_embedder
from knowledge.models import ApiDocument, DocumentChunk, KnowledgeDomain
from knowledge.services.documents import ADDED, UNCHANGED, UPDATED, document_delete, document_ingest
from knowledge.services.indexing import document_index
from knowledge.vectorstore import ChunkVector

pytestmark = pytest.mark.django_db(transaction=True)


def markdown(
    title: str, sections: int, *, domain: str = "payment", words: str = "支付超时时先查询订单状态。"
) -> bytes:
    parts = [f"---\ntitle: {title}\ndomain: {domain}\nkeywords: [{title}]\n---\n", f"# {title}\n"]
    for i in range(sections):
        parts.append(f"## Section {i}\n\n" + words * 20 + f" marker-{i}\n")
    return "\n".join(parts).encode()


def chunk_ids(document: ApiDocument) -> set[str]:
    return {c.chunk_id for c in DocumentChunk.objects.filter(document=document).select_related("document")}


def test_an_upload_is_chunked_embedded_and_stored_in_milvus(vector_store):
    result = document_ingest(data=markdown("支付失败排查手册", 3), name="payment/handbook.md")

    assert result.outcome == ADDED
    doc = ApiDocument.objects.get(doc_key="payment/handbook.md")
    assert doc.status == ApiDocument.Status.INDEXED and doc.error == ""
    assert doc.indexed_at is not None and doc.chunk_count >= 3
    assert doc.chunks.count() == doc.chunk_count
    assert vector_store.chunk_ids(doc_key=doc.doc_key) == chunk_ids(doc)
    assert {c.heading_path for c in doc.chunks.all()} >= {"支付失败排查手册 > Section 0"}
    assert KnowledgeDomain.objects.get(domain_id="payment").document_count == 1


def test_the_chunk_vector_embeds_title_heading_path_and_text(vector_store):
    document_ingest(
        data=markdown("Refund guide", 1, domain="payment", words="Refunds take days. "), name="r.md"
    )
    chunk = DocumentChunk.objects.get(document__doc_key="r.md", chunk_index=0)
    expected = get_embedder().encode([f"Refund guide\nSection 0\n{chunk.content}"])[0]
    stored = np.asarray(vector_store.vectors(["r.md#0"])["r.md#0"])
    assert float(stored @ expected) == pytest.approx(1.0, abs=1e-5)


def test_identical_content_is_unchanged_and_not_reindexed(vector_store):
    document_ingest(data=markdown("A", 2), name="a.md")
    before = ApiDocument.objects.get(doc_key="a.md")

    result = document_ingest(data=markdown("A", 2), name="a.md")

    after = ApiDocument.objects.get(doc_key="a.md")
    assert result.outcome == UNCHANGED and not result.requeued
    assert (after.indexed_at, after.updated_at) == (before.indexed_at, before.updated_at)


def test_a_reupload_with_fewer_chunks_leaves_no_orphan_vectors(vector_store):
    document_ingest(data=markdown("A", 5), name="a.md")
    assert vector_store.count(doc_key="a.md") == ApiDocument.objects.get(doc_key="a.md").chunk_count >= 5

    result = document_ingest(data=markdown("A", 2, words="Completely new text. "), name="a.md")

    doc = ApiDocument.objects.get(doc_key="a.md")
    assert result.outcome == UPDATED and doc.status == ApiDocument.Status.INDEXED
    assert vector_store.chunk_ids(doc_key="a.md") == chunk_ids(doc)
    assert vector_store.count() == doc.chunk_count
    assert all("Completely new text." in c.content for c in doc.chunks.exclude(heading_path="A"))


def test_on_reupload_old_vectors_go_only_after_the_new_ones_are_in(vector_store, monkeypatch):
    document_ingest(data=markdown("A", 5), name="a.md")
    calls = []
    for name in ("upsert", "delete_chunks", "delete_document"):
        real = getattr(vector_store, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            ids = [r.chunk_id for r in args[0]] if _name == "upsert" else args[0] if args else kwargs
            calls.append((_name, ids))
            return _real(*args, **kwargs)

        monkeypatch.setattr(vector_store, name, spy)

    document_ingest(data=markdown("A", 2, words="New. "), name="a.md")

    new_count = ApiDocument.objects.get(doc_key="a.md").chunk_count
    assert [name for name, _ in calls] == ["upsert", "delete_chunks"]  # no delete by document
    assert calls[0][1] == [f"a.md#{i}" for i in range(new_count)]  # overwrites in place
    assert all(int(cid.split("#")[1]) >= new_count for cid in calls[1][1])  # then only the surplus


def test_a_run_after_a_crash_removes_vectors_no_chunk_row_knows(vector_store, monkeypatch):
    document_ingest(data=markdown("A", 2), name="a.md")
    doc = ApiDocument.objects.get(doc_key="a.md")
    # A run died after upserting a longer version: an orphan vector, and INDEXING left behind.
    vector_store.upsert(
        [ChunkVector("a.md#9", get_embedder().encode(["x"])[0].tolist(), "payment", "a.md", 9)]
    )
    ApiDocument.objects.filter(id=doc.id).update(status=ApiDocument.Status.INDEXING)

    document_index(document_id=doc.id)

    assert vector_store.chunk_ids(doc_key="a.md") == chunk_ids(doc)


def test_a_normal_run_finds_stale_ids_without_asking_milvus(vector_store, monkeypatch):
    document_ingest(data=markdown("A", 4), name="a.md")
    asked = []
    real = vector_store.chunk_ids
    monkeypatch.setattr(vector_store, "chunk_ids", lambda **kw: asked.append(kw) or real(**kw))

    document_ingest(data=markdown("A", 1, words="short "), name="a.md")

    assert asked == []
    monkeypatch.undo()
    assert vector_store.chunk_ids(doc_key="a.md") == chunk_ids(ApiDocument.objects.get(doc_key="a.md"))


def test_indexing_twice_leaves_the_same_vectors(vector_store):
    document_ingest(data=markdown("A", 3), name="a.md")
    doc = ApiDocument.objects.get(doc_key="a.md")
    ids = sorted(vector_store.chunk_ids(doc_key="a.md"))
    first = vector_store.vectors(ids)

    document_index(document_id=doc.id)
    document_index(document_id=doc.id)

    assert sorted(vector_store.chunk_ids(doc_key="a.md")) == ids
    second = vector_store.vectors(ids)
    assert all(np.allclose(first[i], second[i], atol=1e-6) for i in ids)
    assert DocumentChunk.objects.filter(document=doc).count() == len(ids)


def test_an_embedding_failure_leaves_failed_with_the_reason_and_no_partial_vectors(
    vector_store, settings, monkeypatch
):
    settings.EMBEDDING_BATCH_SIZE = 2
    embedder = get_embedder()
    real, calls = embedder._encode, []

    def fail_on_second_batch(texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("out of memory in batch 2")
        return real(texts)

    monkeypatch.setattr(embedder, "_encode", fail_on_second_batch)

    document_ingest(data=markdown("A", 6), name="a.md")

    doc = ApiDocument.objects.get(doc_key="a.md")
    assert len(calls) == 2  # the first batch was encoded, then it failed
    assert doc.status == ApiDocument.Status.FAILED
    assert "out of memory in batch 2" in doc.error
    assert vector_store.count() == 0 and doc.chunks.count() == 0


def test_an_embedding_failure_on_reupload_keeps_the_previous_version_whole(vector_store, monkeypatch):
    document_ingest(data=markdown("A", 3), name="a.md")
    old_ids, old_chunks = (
        vector_store.chunk_ids(doc_key="a.md"),
        list(DocumentChunk.objects.values_list("content", flat=True)),
    )

    def broken(texts):
        raise RuntimeError("model crashed")

    monkeypatch.setattr(get_embedder(), "_encode", broken)
    document_ingest(data=markdown("A", 1, words="v2 "), name="a.md")

    doc = ApiDocument.objects.get(doc_key="a.md")
    assert doc.status == ApiDocument.Status.FAILED and "model crashed" in doc.error
    assert vector_store.chunk_ids(doc_key="a.md") == old_ids
    assert list(DocumentChunk.objects.values_list("content", flat=True)) == old_chunks


def test_a_model_that_cannot_load_fails_the_document_with_the_reason(vector_store, settings, tmp_path):
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL = "flag", str(tmp_path / "no-such-model")
    reset_embedder()
    try:
        document_ingest(data=markdown("A", 1), name="a.md")
    finally:
        reset_embedder()
    doc = ApiDocument.objects.get(doc_key="a.md")
    assert doc.status == ApiDocument.Status.FAILED
    assert "cannot load FlagModel" in doc.error and "EMBEDDING_MODEL" in doc.error
    assert vector_store.count() == 0


def test_a_collection_built_for_another_model_fails_indexing_with_the_fix_named(vector_store):
    vector_store.ensure_collection(dim=8, model_name="some-other-model")
    document_ingest(data=markdown("A", 1), name="a.md")
    doc = ApiDocument.objects.get(doc_key="a.md")
    assert doc.status == ApiDocument.Status.FAILED and "reindex --recreate" in doc.error


def test_reuploading_a_failed_document_unchanged_retries_it(vector_store, monkeypatch):
    def broken(texts):
        raise RuntimeError("transient model failure")

    with monkeypatch.context() as patch:
        patch.setattr(get_embedder(), "_encode", broken)
        document_ingest(data=markdown("A", 1), name="a.md")
    assert ApiDocument.objects.get(doc_key="a.md").status == ApiDocument.Status.FAILED

    result = document_ingest(data=markdown("A", 1), name="a.md")

    assert result.outcome == UNCHANGED and result.requeued
    assert ApiDocument.objects.get(doc_key="a.md").status == ApiDocument.Status.INDEXED
    assert vector_store.count(doc_key="a.md") == 1


def test_deleting_a_document_removes_its_chunks_vectors_and_count(vector_store):
    document_ingest(data=markdown("A", 3), name="a.md")
    document_ingest(data=markdown("B", 2), name="b.md")
    assert KnowledgeDomain.objects.get(domain_id="payment").document_count == 2

    document_delete(document=ApiDocument.objects.get(doc_key="a.md"))

    assert vector_store.count(doc_key="a.md") == 0
    assert vector_store.count() == ApiDocument.objects.get(doc_key="b.md").chunk_count
    assert not DocumentChunk.objects.filter(document__doc_key="a.md").exists()
    assert KnowledgeDomain.objects.get(domain_id="payment").document_count == 1


def test_moving_a_document_to_another_domain_moves_its_vectors_and_both_counts(vector_store):
    document_ingest(data=markdown("A", 2, domain="payment"), name="a.md")
    document_ingest(data=markdown("A", 2, domain="infrastructure"), name="a.md")

    counts = dict(KnowledgeDomain.objects.values_list("domain_id", "document_count"))
    assert counts == {"payment": 0, "infrastructure": 1}
    query = get_embedder().encode(["支付超时时先查询订单状态"])[0].tolist()
    assert vector_store.search(query, top_k=5, domain="payment") == []
    assert {h.doc_key for h in vector_store.search(query, top_k=5, domain="infrastructure")} == {"a.md"}


# The new version's hash sorts below and above the old one: the run compares them for equality.
@pytest.mark.parametrize("new_hash", ["0" * 64, "f" * 64], ids=["lower-hash", "higher-hash"])
def test_a_reupload_during_indexing_does_not_let_the_older_run_win(vector_store, monkeypatch, new_hash):
    document_ingest(data=markdown("A", 1), name="a.md")
    doc = ApiDocument.objects.get(doc_key="a.md")
    embedder = get_embedder()
    real = embedder._encode

    def reupload_meanwhile(texts):
        # Another process stores a new version while this run embeds the old one.
        ApiDocument.objects.filter(id=doc.id).update(content="# A\n\nnew version", content_hash=new_hash)
        return real(texts)

    with monkeypatch.context() as patch:
        patch.setattr(embedder, "_encode", reupload_meanwhile)
        result = document_index(document_id=doc.id)
    assert result.status == "superseded"
    assert ApiDocument.objects.get(id=doc.id).status != ApiDocument.Status.INDEXED

    document_index(document_id=doc.id)  # the run the re-upload queued

    doc.refresh_from_db()
    assert doc.status == ApiDocument.Status.INDEXED
    assert [c.content for c in doc.chunks.all()] == ["# A\n\nnew version"]
    assert vector_store.chunk_ids(doc_key="a.md") == {"a.md#0"}


@pytest.mark.django_db(transaction=False)
@pytest.mark.django_db(transaction=False)  # on-commit callbacks captured, not run
def test_a_reupload_keeps_other_services_metadata_but_drops_its_old_frontmatter_values(
    django_capture_on_commit_callbacks, vector_store
):
    # The summaries that follow indexing are kept out: this is about what the new version brings.
    with django_capture_on_commit_callbacks(execute=False):
        document_ingest(data=b"---\ndomain: payment\ncovers: [from the file]\n---\n# A\n\ntext", name="a.md")
        doc = ApiDocument.objects.get(doc_key="a.md")
        doc.metadata = {**doc.metadata, "when_to_retrieve": "generated", "when_to_retrieve_source": "llm"}
        doc.save()

        document_ingest(data=b"---\ndomain: payment\nkeywords: [k]\n---\n# A\n\nnew text", name="a.md")
        # Until the new version is indexed the document keeps answering at the old one
        pending = ApiDocument.objects.get(doc_key="a.md")
        assert pending.metadata["covers"] == ["from the file"] and pending.content == "# A\n\ntext"
        document_index(document_id=doc.pk)

    metadata = ApiDocument.objects.get(doc_key="a.md").metadata
    assert ApiDocument.objects.get(doc_key="a.md").content == "# A\n\nnew text"
    assert "covers" not in metadata and "covers_source" not in metadata
    assert metadata["when_to_retrieve"] == "generated" and metadata["when_to_retrieve_source"] == "llm"
    assert metadata["keywords"] == ["k"]


@pytest.mark.django_db(transaction=False)
def test_indexing_is_queued_only_once_the_upload_commits(vector_store, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        document_ingest(data=markdown("A", 1), name="a.md")
    doc = ApiDocument.objects.get(doc_key="a.md")
    assert doc.status == ApiDocument.Status.PENDING and vector_store.count() == 0
    assert len(callbacks) >= 1

    for callback in callbacks:
        callback()

    doc.refresh_from_db()
    assert doc.status == ApiDocument.Status.INDEXED


@pytest.mark.django_db(transaction=False)
def test_an_unreachable_vector_store_is_retried_then_fails_with_the_reason(
    settings, django_capture_on_commit_callbacks
):
    from config.celery import app
    from knowledge.services.index_status import TemporaryIndexError
    from knowledge.tasks.indexing import index_document
    from knowledge.vectorstore import reset_vector_store
    from tests.conftest import free_port

    settings.MILVUS_URI, settings.MILVUS_TIMEOUT = f"http://127.0.0.1:{free_port()}", 1
    reset_vector_store()
    try:
        with django_capture_on_commit_callbacks(execute=False):
            document_ingest(data=markdown("A", 1), name="a.md")
        doc = ApiDocument.objects.get(doc_key="a.md")

        with pytest.raises(TemporaryIndexError):
            document_index(document_id=doc.id, final_attempt=False)
        doc.refresh_from_db()
        assert doc.status == ApiDocument.Status.PENDING and doc.error.startswith("will retry:")

        # The task retries (eagerly: without its countdown) and, out of retries, records the failure.
        propagates, app.conf.task_eager_propagates = app.conf.task_eager_propagates, False
        try:
            result = index_document.apply(args=(doc.id,))
        finally:
            app.conf.task_eager_propagates = propagates
    finally:
        reset_vector_store()
    doc.refresh_from_db()
    assert result.get() == ApiDocument.Status.FAILED
    assert doc.status == ApiDocument.Status.FAILED and doc.error.startswith("vector store unavailable")
    assert doc.chunks.count() == 0


def test_retrying_a_failed_document_clears_vectors_its_failed_run_left(vector_store):
    from knowledge.services.reindex import documents_reindex

    document_ingest(data=markdown("A", 1), name="a.md")
    doc = ApiDocument.objects.get(doc_key="a.md")
    # A run upserted a longer version, then failed: an orphan vector, and FAILED.
    vector_store.upsert(
        [ChunkVector("a.md#5", get_embedder().encode(["x"])[0].tolist(), "payment", "a.md", 5)]
    )
    ApiDocument.objects.filter(id=doc.id).update(status=ApiDocument.Status.FAILED, error="Milvus went away")

    documents_reindex(document_ids=[doc.id])  # the admin's retry action

    assert vector_store.chunk_ids(doc_key="a.md") == chunk_ids(doc)
