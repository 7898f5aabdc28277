"""Documents in and out: store an uploaded file as a document, delete one.

``document_ingest`` parses the bytes, stores or replaces the ApiDocument (PENDING) with its
original file and queues its indexing on commit (one task, or with the others of a bulk ingest
when it is given an ``IndexQueue``, which then also reports the changed domains, once each);
identical content (same hash) is left alone. ``documents_ingest`` does the same for the files of a
bulk ingest, storing the new documents among them together.
``document_delete`` deletes the row (chunks cascade), then its vectors once that is committed.

Replacing a document is atomic for searchers: the upload stores the new bytes and hash only;
title, text, chunks and vectors stay the indexed version's until the indexing run swaps the new
ones in (knowledge.services.indexing, knowledge.services.versions).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from knowledge.models import ApiDocument, DocumentOriginal
from knowledge.parsing import DocumentParseError, ParsedDocument, parse_document
from knowledge.services import domains
from knowledge.services.index_queue import IndexQueue, index_queue_on_commit
from knowledge.services.vectors import document_vectors_remove_on_commit
from knowledge.services.versions import document_original_new, document_original_store

logger = logging.getLogger(__name__)

ADDED, UPDATED, UNCHANGED, FAILED = "added", "updated", "unchanged", "failed"
#: rows, and bytes of text or file, one INSERT of a bulk ingest writes (a file's bytes travel in
#: its original's row; MariaDB's max_allowed_packet is 16 MB by default)
_CREATE_BATCH = 50
_CREATE_BYTES = 4_000_000


@dataclass(frozen=True)
class IngestResult:
    outcome: str  # added / updated / unchanged / failed
    name: str
    document: ApiDocument | None = None
    error: str = ""
    #: an unchanged document whose last indexing had failed is queued again
    requeued: bool = False

    @property
    def doc_key(self) -> str:
        return self.document.doc_key if self.document is not None else self.name


def _domains_changed(*domain_ids: str, index_queue: IndexQueue | None = None) -> None:
    if index_queue is not None:  # a bulk ingest: once per domain, when its queue is sent
        index_queue.domains_changed(*domain_ids)
        return
    # Once the upload commits; a failing refresh is logged, it must not undo or fail the upload.
    transaction.on_commit(lambda: domains.domains_documents_changed(domain_ids=domain_ids), robust=True)


def _pending_document(parsed: ParsedDocument) -> ApiDocument:
    """A new document of ``parsed``, unsaved, waiting for its first indexing."""
    return ApiDocument(
        doc_key=parsed.doc_key,
        title=parsed.title,
        domain=parsed.domain,
        content=parsed.body,
        content_hash=parsed.content_hash,
        metadata=parsed.metadata,
        status=ApiDocument.Status.PENDING,
    )


def _check_size(data: bytes) -> None:
    limit = settings.INGEST_MAX_FILE_BYTES
    if len(data) > limit:
        raise DocumentParseError(
            "file", f"is {len(data):,} bytes; the limit is {limit:,} bytes (INGEST_MAX_FILE_BYTES)"
        )


def _queue(document_id: int, *, repair: bool, index_queue: IndexQueue | None) -> None:
    if index_queue is None:
        index_queue_on_commit(document_id, repair=repair)
    else:
        index_queue.add(document_id, repair=repair)


def document_ingest(
    *, data: bytes, name: str, domain: str | None = None, index_queue: IndexQueue | None = None
) -> IngestResult:
    """Store one uploaded file as a document and queue its indexing.

    ``name`` is the file's path inside the upload: it becomes the doc key, so uploading the same
    name again replaces that document. ``domain`` applies when the frontmatter names none.
    ``index_queue``: a bulk ingest's queue, sent by its caller (None: a task of its own).
    Returns added / updated / unchanged; raises DocumentParseError (nothing stored) for bad input.
    """
    _check_size(data)
    parsed = parse_document(data, name=name, domain=domain)
    return _parsed_ingest(parsed, data=data, name=name, index_queue=index_queue)


@transaction.atomic
def _parsed_ingest(
    parsed: ParsedDocument, *, data: bytes, name: str, index_queue: IndexQueue | None
) -> IngestResult:
    existing = ApiDocument.objects.select_for_update().filter(doc_key=parsed.doc_key).first()
    if existing is None:
        try:
            with transaction.atomic():
                document = _pending_document(parsed)
                document.save(force_insert=True)
        except IntegrityError:
            # The same key uploaded concurrently: the other upload created it; replace it.
            existing = ApiDocument.objects.select_for_update().get(doc_key=parsed.doc_key)
        else:
            document_original_store(document=document, data=data, name=name, created=True)
            _queue(document.id, repair=False, index_queue=index_queue)
            _domains_changed(document.domain, index_queue=index_queue)
            return IngestResult(outcome=ADDED, name=name, document=document)

    if existing.content_hash == parsed.content_hash:
        if existing.status == ApiDocument.Status.FAILED:
            existing.status = ApiDocument.Status.PENDING
            existing.error = ""
            existing.save(update_fields=["status", "error", "updated_at"])
            _queue(existing.id, repair=True, index_queue=index_queue)
            return IngestResult(outcome=UNCHANGED, name=name, document=existing, requeued=True)
        return IngestResult(outcome=UNCHANGED, name=name, document=existing)

    old_domain = existing.domain
    # A previous run that failed or died may have left vectors behind; the status is reset below.
    repair = existing.status != ApiDocument.Status.INDEXED or bool(existing.error)
    # Title, text and metadata stay at the indexed version until the new one is swapped in with
    # its chunks (knowledge.services.versions): lookups keep answering meanwhile.
    existing.domain = parsed.domain
    existing.content_hash = parsed.content_hash
    existing.status = ApiDocument.Status.PENDING
    existing.error = ""
    existing.save()
    document_original_store(document=existing, data=data, name=name)
    _queue(existing.id, repair=repair, index_queue=index_queue)
    _domains_changed(old_domain, existing.domain, index_queue=index_queue)
    return IngestResult(outcome=UPDATED, name=name, document=existing)


@dataclass(frozen=True)
class IngestFile:
    """One file of a bulk ingest: what ``document_ingest`` takes."""

    data: bytes
    name: str
    domain: str | None = None


def documents_ingest(*, files: list[IngestFile], index_queue: IndexQueue) -> list[IngestResult]:
    """``document_ingest_safely`` for the files of a bulk ingest, a result each, in order.

    The files whose doc key no document has yet are stored together: one query finds them, and
    their documents and originals are written in one transaction of a few INSERTs (under
    ``_CREATE_BYTES`` each), instead of a transaction and four queries each. The others
    (replacements, unchanged files) go through ``document_ingest`` one by one, as does the whole
    group when another upload created one of its documents meanwhile (the unique doc key refuses
    the insert)."""
    results: list[IngestResult | None] = [None] * len(files)
    parsed: dict[int, ParsedDocument] = {}
    for i, file in enumerate(files):
        try:
            _check_size(file.data)
            parsed[i] = parse_document(file.data, name=file.name, domain=file.domain)
        except DocumentParseError as exc:
            results[i] = IngestResult(outcome=FAILED, name=file.name, error=str(exc))
    keys = Counter(p.doc_key for p in parsed.values())
    known = _doc_keys_taken(list(keys))
    new = {i: p for i, p in parsed.items() if p.doc_key not in known and keys[p.doc_key] == 1}
    for i, document in _documents_created(new, files).items():
        index_queue.add(document.id, repair=False)
        index_queue.domains_changed(document.domain)
        results[i] = IngestResult(outcome=ADDED, name=files[i].name, document=document)
    for i, file in enumerate(files):
        if results[i] is None:
            results[i] = _parsed_ingest(parsed[i], data=file.data, name=file.name, index_queue=index_queue)
    return [r for r in results if r is not None]


def _doc_keys_taken(doc_keys: list[str]) -> set[str]:
    return set(ApiDocument.objects.filter(doc_key__in=doc_keys).values_list("doc_key", flat=True))


def _documents_created(new: dict[int, ParsedDocument], files: list[IngestFile]) -> dict[int, ApiDocument]:
    """New documents (PENDING) with their originals, in one transaction; {} when another upload
    created one of them first (the caller then stores each on its own)."""
    if not new:
        return {}
    documents = {i: _pending_document(p) for i, p in new.items()}
    try:
        with transaction.atomic():
            for rows in _within_bytes(list(documents.values()), lambda d: len(d.content.encode())):
                ApiDocument.objects.bulk_create(rows)
            # Read back: not every backend returns the ids of a bulk INSERT (MySQL does not).
            ids = dict(
                ApiDocument.objects.filter(doc_key__in=[d.doc_key for d in documents.values()]).values_list(
                    "doc_key", "id"
                )
            )
            for document in documents.values():
                document.pk = ids[document.doc_key]
            originals = [
                document_original_new(document=documents[i], data=files[i].data, name=files[i].name)
                for i in documents
            ]
            for rows in _within_bytes(originals, lambda o: o.size):
                DocumentOriginal.objects.bulk_create(rows)
    except IntegrityError:
        logger.info("a document of this upload was created meanwhile; its files are stored one by one")
        return {}
    return documents


def _within_bytes(rows: list, size_of) -> Iterator[list]:
    """``rows`` in INSERTs of at most ``_CREATE_BATCH`` rows and about ``_CREATE_BYTES`` (a row
    larger than that goes alone): MariaDB refuses a statement over its ``max_allowed_packet``."""
    batch: list = []
    held = 0
    for row in rows:
        size = size_of(row)
        if batch and (len(batch) >= _CREATE_BATCH or held + size > _CREATE_BYTES):
            yield batch
            batch, held = [], 0
        batch.append(row)
        held += size
    if batch:
        yield batch


def document_ingest_safely(
    *, data: bytes, name: str, domain: str | None = None, index_queue: IndexQueue | None = None
) -> IngestResult:
    """document_ingest, with bad input reported as a ``failed`` result instead of raised."""
    try:
        return document_ingest(data=data, name=name, domain=domain, index_queue=index_queue)
    except DocumentParseError as exc:
        return IngestResult(outcome=FAILED, name=name, error=str(exc))


@transaction.atomic
def document_delete(*, document: ApiDocument) -> None:
    """Delete a document, its chunks and (once that is committed) its vectors."""
    doc_key, domain_id = document.doc_key, document.domain
    document.delete()
    _domains_changed(domain_id)
    document_vectors_remove_on_commit(doc_key)
