"""Bulk indexing fills embedding batches across documents, and one bad document costs only itself:
it ends FAILED with the reason and leaves no vector in Milvus, the others of its batch index, a
re-index swaps in atomically. Embedded mode (eager tasks, real embedder, real milvus-lite) and,
marked ``services``, through the real Celery worker. Vectors are counted in Milvus itself."""

from __future__ import annotations

import pytest

from knowledge.embeddings import get_embedder
from knowledge.models import ApiDocument, DocumentChunk
from knowledge.services import indexing
from knowledge.services.index_queue import index_batches
from knowledge.services.reindex import documents_reindex
from knowledge.services.uploads import documents_upload, items_ingest, upload_items
from tests.knowledge.test_indexing_worker import wait_until_settled
from tests.knowledge.test_ingestion import chunk_ids, markdown
from tests.support import documents as files

pytestmark = pytest.mark.django_db(transaction=True)

POISON = "毒药段落 poison-marker"


def _upload(count: int, *, poisoned: set[int] = frozenset(), sections: int = 2) -> list[tuple[str, bytes]]:
    return [
        (
            f"doc-{i}.md",
            markdown(f"Doc {i}", sections, words=(POISON if i in poisoned else "支付超时时先查询订单状态。")),
        )
        for i in range(count)
    ]


def _assert_milvus_matches_chunk_rows(vector_store) -> None:
    """Milvus holds exactly the chunk rows' vectors: nothing lost, no orphan."""
    for document in ApiDocument.objects.all():
        assert vector_store.chunk_ids(doc_key=document.doc_key) == chunk_ids(document), document.doc_key
    assert vector_store.count() == DocumentChunk.objects.count()


@pytest.fixture
def encode_calls(monkeypatch):
    """Every batch the model is asked to encode; a batch holding the poison marker fails."""
    embedder = get_embedder()
    real, calls = embedder._encode, []

    def encode(texts):
        calls.append(list(texts))
        if any(POISON in t for t in texts):
            raise RuntimeError("the model choked on this text")
        return real(texts)

    monkeypatch.setattr(embedder, "_encode", encode)
    return calls


def test_a_bulk_upload_fills_embedding_batches_across_documents(vector_store, settings, encode_calls):
    settings.EMBEDDING_BATCH_SIZE, settings.INGEST_INDEX_BATCH_DOCUMENTS = 8, 6
    results = documents_upload(files=_upload(6))

    assert [r.outcome for r in results] == ["added"] * 6
    chunks = DocumentChunk.objects.count()
    assert chunks >= 12
    # one run for the six documents: full batches of 8 chunks, each spanning documents
    assert [len(c) for c in encode_calls] == [8] * (chunks // 8) + ([chunks % 8] if chunks % 8 else [])
    assert len({t.splitlines()[0] for t in encode_calls[0]}) > 1
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {"INDEXED"}
    _assert_milvus_matches_chunk_rows(vector_store)


def test_one_document_the_model_fails_on_fails_alone_and_leaves_no_vector(
    vector_store, settings, encode_calls
):
    settings.EMBEDDING_BATCH_SIZE = 8
    documents_upload(files=_upload(5, poisoned={2}))

    bad = ApiDocument.objects.get(doc_key="doc-2.md")
    assert bad.status == ApiDocument.Status.FAILED
    assert "the model choked on this text" in bad.error
    assert bad.indexed_at is None and bad.chunks.count() == 0
    assert vector_store.count(doc_key="doc-2.md") == 0
    others = ApiDocument.objects.exclude(pk=bad.pk)
    assert set(others.values_list("status", flat=True)) == {"INDEXED"}
    assert all(d.chunks.count() > 0 for d in others)
    _assert_milvus_matches_chunk_rows(vector_store)


def test_a_document_whose_swap_fails_after_the_upsert_fails_alone_and_its_vectors_go(
    vector_store, monkeypatch
):
    real_rows = indexing.chunk_rows
    bad_id = []

    def rows(document_id, chunks):
        if document_id in bad_id:
            raise RuntimeError("disk full while writing chunk rows")
        return real_rows(document_id, chunks)

    monkeypatch.setattr(indexing, "chunk_rows", rows)
    monkeypatch.setattr(indexing, "_upsert", _spy_upsert(indexing._upsert, bad_id, vector_store))
    documents_upload(files=_upload(4))

    bad = ApiDocument.objects.get(pk=bad_id[0])
    assert bad.status == ApiDocument.Status.FAILED and "disk full" in bad.error
    assert bad.chunks.count() == 0 and vector_store.count(doc_key=bad.doc_key) == 0
    assert ApiDocument.objects.filter(status="INDEXED").count() == 3
    _assert_milvus_matches_chunk_rows(vector_store)


def test_a_batch_is_swapped_in_the_same_few_queries_whatever_its_size(vector_store, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    real = indexing._swapped_together
    swaps: list[tuple[int, int, bool]] = []

    def counted(runs, timings):
        with CaptureQueriesContext(connection) as queries:
            together = real(runs, timings)
        swaps.append((len(runs), len(queries.captured_queries), together))
        return together

    monkeypatch.setattr(indexing, "_swapped_together", counted)
    # Given a batch of 2 documents, then one of 7 (re-uploads of the first two among them)
    documents_upload(files=_upload(2))
    documents_upload(files=_upload(7, sections=3))

    # Then each batch was swapped together, in the same number of queries, but one: the second
    # batch's re-uploads bring their new text and title, written in one more query
    assert [(n, together) for n, _, together in swaps] == [(2, True), (7, True)]
    assert swaps[1][1] == swaps[0][1] + 1
    # And the result is what a swap per document gives: every document INDEXED, its chunk rows
    # those of its latest version, Milvus holding exactly them (the re-uploads' surplus pruned)
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {"INDEXED"}
    for document in ApiDocument.objects.all():
        assert document.chunk_count == document.chunks.count() > 0
        assert document.indexed_at is not None and document.error == ""
    _assert_milvus_matches_chunk_rows(vector_store)


def _spy_upsert(real, bad_id: list[int], vector_store):
    """Pick the batch's second document as the one whose swap fails, and check its vectors
    really were in Milvus before the failure (so the test shows they were removed)."""

    def upsert(runs, *args, **kwargs):
        bad_id.append(runs[1].document_id)
        real(runs, *args, **kwargs)
        assert vector_store.count(doc_key=runs[1].doc_key) > 0

    return upsert


def test_a_scanned_pdf_in_a_zip_fails_with_its_reason_and_the_rest_index(vector_store):
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("payment/guide.pdf", files.pdf_bytes(pages=2))
        archive.writestr("payment/scan.pdf", files.scanned_pdf_bytes())
        archive.writestr("ops/deploy.docx", files.docx_bytes())
        archive.writestr("ops/notes.md", markdown("Notes", 2, domain="ops"))
    results = documents_upload(files=[("kb.zip", buffer.getvalue())])

    assert [r.outcome for r in results] == ["added"] * 4
    statuses = dict(ApiDocument.objects.values_list("doc_key", "status"))
    assert statuses == {
        "payment/guide.pdf": "INDEXED",
        "payment/scan.pdf": "FAILED",
        "ops/deploy.docx": "INDEXED",
        "ops/notes.md": "INDEXED",
    }
    # the parse is what judged it: a FAILED row with the reason, no chunk, no vector
    scan = ApiDocument.objects.get(doc_key="payment/scan.pdf")
    assert scan.error == "no text layer (scanned document?)" and scan.chunks.count() == 0
    assert vector_store.count(doc_key="payment/scan.pdf") == 0
    _assert_milvus_matches_chunk_rows(vector_store)


def test_the_files_of_one_run_share_one_conversion_child(vector_store, monkeypatch):
    from knowledge.services import versions

    sandboxes = []
    real = versions.version_sandbox

    def recording():
        sandboxes.append(real())
        return sandboxes[-1]

    monkeypatch.setattr(indexing, "version_sandbox", recording)
    documents_upload(
        files=[
            ("a.pdf", files.pdf_bytes(pages=1)),
            ("b.pdf", files.pdf_bytes(pages=2)),
            ("scan.pdf", files.scanned_pdf_bytes()),
            ("c.docx", files.docx_bytes()),
        ],
        domain="ops",
    )
    assert len(sandboxes) == 1 and sandboxes[0].children_started == 1
    assert ApiDocument.objects.filter(status="INDEXED").count() == 3
    _assert_milvus_matches_chunk_rows(vector_store)


def test_a_batch_reindex_that_fails_one_document_keeps_its_previous_version_whole(
    vector_store, settings, monkeypatch
):
    settings.EMBEDDING_BATCH_SIZE = 4
    documents_upload(files=_upload(4))
    before = {d.doc_key: (d.indexed_at, chunk_ids(d)) for d in ApiDocument.objects.all()}
    target = ApiDocument.objects.get(doc_key="doc-1.md")

    embedder = get_embedder()
    real = embedder._encode

    def encode(texts):
        if any(t.startswith("Doc 1\n") for t in texts):
            raise RuntimeError("the model went away")
        return real(texts)

    monkeypatch.setattr(embedder, "_encode", encode)
    assert documents_reindex() == 4

    target.refresh_from_db()
    assert target.status == ApiDocument.Status.FAILED and "the model went away" in target.error
    # still searchable at its previous version: same indexed_at, chunk rows and vectors
    assert target.indexed_at == before["doc-1.md"][0]
    assert chunk_ids(target) == before["doc-1.md"][1] == vector_store.chunk_ids(doc_key="doc-1.md")
    for other in ApiDocument.objects.exclude(pk=target.pk):
        assert other.status == ApiDocument.Status.INDEXED and other.indexed_at > before[other.doc_key][0]
    _assert_milvus_matches_chunk_rows(vector_store)


def test_index_batches_split_by_the_setting_in_id_order_and_merge_repairs(settings):
    settings.INGEST_INDEX_BATCH_DOCUMENTS = 2
    assert index_batches([(5, False), (1, False), (3, True), (1, True), (9, False)]) == [
        [(1, True), (3, True)],
        [(5, False), (9, False)],
    ]


def test_progress_is_reported_per_file_and_a_rejected_file_stores_nothing(vector_store):
    seen = []
    items = upload_items([("good.md", markdown("Good", 1)), ("bad.md", b"\xff\xfe\x00bad")])
    results = items_ingest(items=items, domain="payment", progress=lambda r: seen.append((r.name, r.outcome)))

    assert seen == [("good.md", "added"), ("bad.md", "failed")]
    assert results[1].error
    # refused at upload: no row at all (only files the real parse judges keep a FAILED row)
    assert list(ApiDocument.objects.values_list("doc_key", "status")) == [("good.md", "INDEXED")]
    _assert_milvus_matches_chunk_rows(vector_store)


@pytest.mark.services
def test_the_worker_indexes_a_bulk_upload_in_batches_and_a_bad_file_costs_only_itself(
    vector_store, celery_worker, settings
):
    # the worker process reads INGEST_INDEX_BATCH_DOCUMENTS from its own settings (32): all in one task
    items = upload_items(
        [
            *_upload(6),
            ("scan.pdf", files.scanned_pdf_bytes()),
            ("huge.pdf", files.many_pages_pdf_bytes(10_000)),
            ("guide.pdf", files.pdf_bytes(pages=2)),
        ]
    )
    items_ingest(items=items, domain="payment")
    wait_until_settled(timeout=240)

    statuses = dict(ApiDocument.objects.values_list("doc_key", "status"))
    log = celery_worker.log_path.read_text()[-3000:]
    assert statuses.pop("scan.pdf") == "FAILED", log
    assert statuses.pop("huge.pdf") == "FAILED", log
    assert set(statuses.values()) == {"INDEXED"}, log
    assert vector_store.count(doc_key="scan.pdf") == vector_store.count(doc_key="huge.pdf") == 0
    _assert_milvus_matches_chunk_rows(vector_store)
