"""A bulk ingest stores the new documents of a group of files together (one transaction, a fixed
number of queries) and every other file as a single upload would: the outcomes, rows and queued
indexing are those of ``document_ingest`` file by file."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.models import ApiDocument, DocumentOriginal
from knowledge.services import documents as documents_module
from knowledge.services.documents import (
    ADDED,
    FAILED,
    UNCHANGED,
    UPDATED,
    IngestFile,
    document_ingest,
    documents_ingest,
)
from knowledge.services.index_queue import IndexQueue
from tests.knowledge.test_ingestion import markdown

pytestmark = pytest.mark.django_db


def _files(count: int, *, start: int = 0) -> list[IngestFile]:
    return [IngestFile(data=markdown(f"Doc {i}", 1), name=f"doc-{i}.md") for i in range(start, start + count)]


def _stored(files: list[IngestFile], capture) -> tuple[list, IndexQueue]:
    queue = IndexQueue()
    with capture(execute=True):
        results = documents_ingest(files=files, index_queue=queue)
    return results, queue


def test_new_replaced_unchanged_and_bad_files_get_the_outcomes_a_single_upload_gives(
    django_capture_on_commit_callbacks,
):
    # Given two stored documents
    with django_capture_on_commit_callbacks(execute=False):
        document_ingest(data=markdown("Kept", 1), name="kept.md")
        replaced = document_ingest(data=markdown("Old", 1), name="replaced.md").document
    files = [
        IngestFile(data=markdown("New A", 1, domain="payment"), name="new-a.md"),
        IngestFile(data=markdown("Kept", 1), name="kept.md"),
        IngestFile(data=b"\xff\xfe not text", name="broken.md"),
        IngestFile(data=markdown("New", 2), name="replaced.md"),
        IngestFile(data=b"# New B\n\ntext", name="ops/new-b.md", domain="ops"),
    ]

    results, queue = _stored(files, django_capture_on_commit_callbacks)

    # Then each file has its outcome, in order
    assert [(r.name, r.outcome) for r in results] == [
        ("new-a.md", ADDED),
        ("kept.md", UNCHANGED),
        ("broken.md", FAILED),
        ("replaced.md", UPDATED),
        ("ops/new-b.md", ADDED),
    ]
    assert "broken.md" not in set(ApiDocument.objects.values_list("doc_key", flat=True))
    assert results[2].error
    # the new documents are PENDING with their original bytes, and queued with the replacement
    for result, file in ((results[0], files[0]), (results[4], files[4])):
        document = ApiDocument.objects.get(doc_key=file.name)
        assert result.document.pk == document.pk and document.status == ApiDocument.Status.PENDING
        original = DocumentOriginal.objects.get(document=document)
        assert bytes(original.data) == file.data and original.size == len(file.data)
    assert ApiDocument.objects.get(doc_key="ops/new-b.md").domain == "ops"
    assert queue.document_ids == sorted([results[0].document.pk, replaced.pk, results[4].document.pk])


def test_new_documents_are_stored_in_the_same_few_queries_however_many_there_are(
    django_capture_on_commit_callbacks,
):
    counts = []
    for start, count in ((0, 3), (100, 40)):
        with CaptureQueriesContext(connection) as queries:
            results, _ = _stored(_files(count, start=start), django_capture_on_commit_callbacks)
        assert {r.outcome for r in results} == {ADDED}
        counts.append(len(queries.captured_queries))

    assert counts[0] == counts[1]
    assert ApiDocument.objects.count() == DocumentOriginal.objects.count() == 43


def test_a_document_created_by_another_upload_meanwhile_sends_the_group_one_by_one(
    django_capture_on_commit_callbacks, monkeypatch
):
    # Given a document another upload created after this one looked for its keys
    with django_capture_on_commit_callbacks(execute=False):
        document_ingest(data=markdown("Doc 1", 1), name="doc-1.md")
    monkeypatch.setattr(documents_module, "_doc_keys_taken", lambda keys: set())

    results, queue = _stored(_files(3), django_capture_on_commit_callbacks)

    # Then the unique doc key refused the group's insert, and each file was stored on its own
    assert [(r.name, r.outcome) for r in results] == [
        ("doc-0.md", ADDED),
        ("doc-1.md", UNCHANGED),
        ("doc-2.md", ADDED),
    ]
    assert ApiDocument.objects.count() == DocumentOriginal.objects.count() == 3
    assert len(queue.document_ids) == 2


def test_one_doc_key_twice_in_a_group_is_stored_then_replaced(django_capture_on_commit_callbacks):
    files = [
        IngestFile(data=markdown("First", 1), name="same.md"),
        IngestFile(data=markdown("Second", 1), name="same.md"),
    ]

    results, _ = _stored(files, django_capture_on_commit_callbacks)

    assert [r.outcome for r in results] == [ADDED, UPDATED]
    assert ApiDocument.objects.filter(doc_key="same.md").count() == 1


def test_large_files_are_inserted_a_few_at_a_time(django_capture_on_commit_callbacks, monkeypatch):
    # MariaDB refuses a statement over its packet limit: the rows go in INSERTs under a byte budget
    monkeypatch.setattr(documents_module, "_CREATE_BYTES", 30_000)
    files = [
        IngestFile(data=markdown(f"Big {i}", 6, words="很长的一段内容。" * 10), name=f"big-{i}.md")
        for i in range(5)
    ]
    assert all(20_000 < len(f.data) < 30_000 for f in files)

    with CaptureQueriesContext(connection) as queries:
        results, _ = _stored(files, django_capture_on_commit_callbacks)

    assert {r.outcome for r in results} == {ADDED}
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    originals = [sql for sql in inserts if "document_original" in sql]
    assert len(originals) == 5  # one each: two would pass the budget
    assert DocumentOriginal.objects.count() == 5
