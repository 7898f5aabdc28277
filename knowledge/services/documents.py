"""Documents in and out: store an uploaded file as a document, delete one.

``document_ingest`` parses the bytes, stores or replaces the ApiDocument (PENDING) with its
original file and queues its indexing on commit (one task, or with the others of a bulk ingest
when it is given an ``IndexQueue``, which then also reports the changed domains, once each);
identical content (same hash) is left alone.
``document_delete`` deletes the row (chunks cascade), then its vectors once that is committed.

Replacing a document is atomic for searchers: the upload stores the new bytes and hash only;
title, text, chunks and vectors stay the indexed version's until the indexing run swaps the new
ones in (knowledge.services.indexing, knowledge.services.versions).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from knowledge.models import ApiDocument
from knowledge.parsing import DocumentParseError, parse_document
from knowledge.services import domains
from knowledge.services.index_queue import IndexQueue, index_queue_on_commit
from knowledge.services.vectors import document_vectors_remove_on_commit
from knowledge.services.versions import document_original_store

ADDED, UPDATED, UNCHANGED, FAILED = "added", "updated", "unchanged", "failed"


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


@transaction.atomic
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
    existing = ApiDocument.objects.select_for_update().filter(doc_key=parsed.doc_key).first()
    if existing is None:
        try:
            with transaction.atomic():
                document = ApiDocument.objects.create(
                    doc_key=parsed.doc_key,
                    title=parsed.title,
                    domain=parsed.domain,
                    content=parsed.body,
                    content_hash=parsed.content_hash,
                    metadata=parsed.metadata,
                    status=ApiDocument.Status.PENDING,
                )
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
