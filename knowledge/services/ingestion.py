"""Documents in, chunks and vectors out: store, index, re-index and delete documents.

The flow (admin upload, ``import_documents`` and ``setup_demo`` all come through here)::

    document_ingest   parse the bytes, store/replace the ApiDocument (PENDING), queue indexing
                      on commit; identical content (same hash) is left alone
    document_index    (the Celery task's work) chunk, embed every chunk, upsert the vectors,
                      then swap the DocumentChunk rows and mark INDEXED in one transaction, then
                      delete vectors of chunks that no longer exist
    document_delete   delete the row (chunks cascade), then its vectors once that is committed

Replacing a document is atomic for searchers: until the new vectors are in Milvus, the old
vectors and the old DocumentChunk rows stay; the new vectors overwrite the old ones under the same
stable ids (``<doc_key>#<index>``) and only surplus old ids are deleted, after the swap. An
embedding failure happens before anything is written to Milvus, so it leaves no partial vectors.

The vector of a chunk embeds ``title``, the heading path (without a leading repeat of the title)
and the chunk text, one per line: a chunk under "超时" in "支付失败排查手册" is found by a
question about payment timeouts even when its text never says "payment".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from knowledge.chunking import Chunk, chunk_document
from knowledge.converters import ConversionError
from knowledge.embeddings import EmbeddingError, embedding_signature, get_embedder
from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
from knowledge.parsing import DocumentParseError, parse_document
from knowledge.services import domains
from knowledge.services.document_metadata import document_indexed
from knowledge.services.locks import LockTimeout, document_lock
from knowledge.services.versions import (
    document_original_store,
    document_version_apply,
    document_version_prepare,
    document_version_refused,
    metadata_merged,
)
from knowledge.vectorstore import (
    ChunkVector,
    VectorStoreError,
    VectorStoreMismatch,
    get_vector_store,
    lexical_fields_message,
)

logger = logging.getLogger(__name__)

ADDED, UPDATED, UNCHANGED, FAILED = "added", "updated", "unchanged", "failed"
_MAX_ERROR_CHARS = 2000


class TemporaryIndexError(Exception):
    """Indexing could not finish for a reason that may pass (Milvus unreachable, lock busy)."""


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


@dataclass(frozen=True)
class IndexResult:
    status: str  # INDEXED / FAILED, or "superseded" / "gone" when there was nothing to finish
    chunk_count: int = 0
    error: str = ""
    stale_deleted: int = 0
    timings: dict[str, float] = field(default_factory=dict)


# --- helpers -----------------------------------------------------------------------------------
def chunk_embedding_text(*, title: str, heading_path: tuple[str, ...], content: str) -> str:
    """What a chunk's vector embeds: title, heading path, text (see the module docstring)."""
    path = list(heading_path)
    if path and path[0].strip() == title.strip():
        path = path[1:]
    lines = [title]
    if path:
        lines.append(" > ".join(path))
    lines.append(content)
    return "\n".join(lines)


# What indexing writes for a document's chunks. One place, shared with the lookup tests' corpus
# (tests/retrieval/conftest.py), so the vectors those tests search are the ones production writes.
def chunk_embedding_texts(document: ApiDocument, chunks: list[Chunk]) -> list[str]:
    return [
        chunk_embedding_text(title=document.title, heading_path=c.heading_path, content=c.content)
        for c in chunks
    ]


def chunk_vectors(
    document: ApiDocument, chunks: list[Chunk], *, vectors: Sequence, texts: list[str]
) -> list[ChunkVector]:
    """One Milvus row per chunk: its vector and (for BM25) the text that was embedded."""
    return [
        ChunkVector(
            chunk_id=chunk_id_for(document.doc_key, chunk.index),
            vector=vector.tolist(),
            domain=document.domain,
            doc_key=document.doc_key,
            chunk_index=chunk.index,
            text=text,
        )
        for chunk, vector, text in zip(chunks, vectors, texts, strict=True)
    ]


def chunk_rows(document_id: int, chunks: list[Chunk]) -> list[DocumentChunk]:
    return [
        DocumentChunk(
            document_id=document_id,
            chunk_index=c.index,
            heading_path=c.heading_path_text[:1024],
            content=c.content,
            pages=c.pages_text,
        )
        for c in chunks
    ]


def document_chunks(document: ApiDocument) -> list[Chunk]:
    return chunk_document(
        document.content,
        markdown=(document.metadata or {}).get("format", "markdown") != "text",  # converted = Markdown
        target=settings.CHUNK_TARGET_CHARS,
        overlap=settings.CHUNK_OVERLAP_CHARS,
    )


def _queue_index(document_id: int, *, repair: bool = False) -> None:
    """Queue indexing once the surrounding transaction commits (the row must exist for the worker).

    ``repair``: the document's last run failed or died, so the run should ask Milvus for vectors
    no chunk row knows of (see document_index)."""

    def send() -> None:
        from knowledge.tasks.indexing import index_document

        try:
            index_document.delay(document_id, repair=repair)
        except Exception:
            # The document is committed as PENDING; a broker outage must not turn the upload into
            # an error page. `reindex` (or the pending sweep) queues it again.
            logger.exception("could not queue indexing of document %s; it stays PENDING", document_id)

    transaction.on_commit(send)


def _domains_changed(*domain_ids: str) -> None:
    for domain_id in dict.fromkeys(d for d in domain_ids if d):
        # robust: a failing hook is logged; it must not undo or fail the upload that triggered it.
        transaction.on_commit(lambda d=domain_id: domains.domain_documents_changed(domain_id=d), robust=True)


def _check_size(data: bytes) -> None:
    limit = settings.INGEST_MAX_FILE_BYTES
    if len(data) > limit:
        raise DocumentParseError(
            "file", f"is {len(data):,} bytes; the limit is {limit:,} bytes (INGEST_MAX_FILE_BYTES)"
        )


# --- ingest ------------------------------------------------------------------------------------
@transaction.atomic
def document_ingest(*, data: bytes, name: str, domain: str | None = None) -> IngestResult:
    """Store one uploaded file as a document and queue its indexing.

    ``name`` is the file's path inside the upload: it becomes the doc key, so uploading the same
    name again replaces that document. ``domain`` applies when the frontmatter names none.
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
            document_original_store(document=document, data=data, name=name)
            _queue_index(document.id)
            _domains_changed(document.domain)
            return IngestResult(outcome=ADDED, name=name, document=document)

    if existing.content_hash == parsed.content_hash:
        if existing.status == ApiDocument.Status.FAILED:
            existing.status = ApiDocument.Status.PENDING
            existing.error = ""
            existing.save(update_fields=["status", "error", "updated_at"])
            _queue_index(existing.id, repair=True)
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
    _queue_index(existing.id, repair=repair)
    _domains_changed(old_domain, existing.domain)
    return IngestResult(outcome=UPDATED, name=name, document=existing)


def document_ingest_safely(*, data: bytes, name: str, domain: str | None = None) -> IngestResult:
    """document_ingest, with bad input reported as a ``failed`` result instead of raised."""
    try:
        return document_ingest(data=data, name=name, domain=domain)
    except DocumentParseError as exc:
        return IngestResult(outcome=FAILED, name=name, error=str(exc))


# --- index -------------------------------------------------------------------------------------
def _set_status(document_id: int, version: str, status: str, error: str = "") -> bool:
    """Set the status of this version of the document; False when a newer upload replaced it."""
    updated = ApiDocument.objects.filter(id=document_id, content_hash=version).update(
        status=status, error=error[:_MAX_ERROR_CHARS], updated_at=timezone.now()
    )
    return bool(updated)


def document_index(*, document_id: int, final_attempt: bool = True, repair: bool = False) -> IndexResult:
    """Chunk, embed and store one document's vectors; the work of the indexing task.

    Safe to run twice (same ids, same vectors). Permanent failures (the model fails, the
    collection was built for another model) end FAILED with the reason. A temporary one (Milvus
    unreachable) raises TemporaryIndexError unless ``final_attempt``, when it ends FAILED too.
    ``repair`` (or a document left INDEXING/FAILED/with an error) makes the run also delete vectors
    of the document that no chunk row backs, which costs a Milvus query.
    """
    try:
        with document_lock(document_id=document_id):
            return _document_index_locked(document_id=document_id, final_attempt=final_attempt, repair=repair)
    except LockTimeout as exc:
        if final_attempt:
            document_index_failed(document_id=document_id, reason=f"gave up waiting: {exc}")
            return IndexResult(status=ApiDocument.Status.FAILED, error=str(exc))
        raise TemporaryIndexError(str(exc)) from exc


def _document_index_locked(*, document_id: int, final_attempt: bool, repair: bool) -> IndexResult:
    document = ApiDocument.objects.filter(id=document_id).first()
    if document is None:
        return IndexResult(status="gone")
    version = document.content_hash
    doc_key = document.doc_key
    # A run that died mid-way (INDEXING left behind), failed or is being retried may have left
    # vectors no chunk row knows of: such a run asks Milvus what the document holds. A normal run
    # knows its stale ids from the previous chunk rows, which spares a Milvus query per document.
    recovering = (
        repair
        or document.status in (ApiDocument.Status.INDEXING, ApiDocument.Status.FAILED)
        or bool(document.error)
    )
    if not _set_status(document_id, version, ApiDocument.Status.INDEXING):
        return IndexResult(status="superseded")
    try:  # a re-upload's text (PDF, DOCX...: converted in a sandbox), swapped in with its chunks
        prepared = document_version_prepare(document=document)
    except ConversionError as exc:
        document_version_refused(document=document, version=version, reason=exc.reason)
        return IndexResult(status=ApiDocument.Status.FAILED, error=exc.reason)
    if prepared is not None:
        document.title, document.content = prepared.title, prepared.body
        document.metadata = metadata_merged(document.metadata, prepared)

    timings: dict[str, float] = {}
    try:
        started = time.perf_counter()
        chunks = document_chunks(document)
        texts = chunk_embedding_texts(document, chunks)
        timings["chunk_s"] = time.perf_counter() - started

        started = time.perf_counter()
        embedder = get_embedder()
        # Every chunk is embedded before anything is written: a failure here leaves Milvus as it was.
        vectors = embedder.encode(texts, batch_size=settings.EMBEDDING_BATCH_SIZE)
        timings["embed_s"] = time.perf_counter() - started

        started = time.perf_counter()
        store = get_vector_store()
        store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
        store.upsert(chunk_vectors(document, chunks, vectors=vectors, texts=texts))
        timings["upsert_s"] = time.perf_counter() - started
    except (EmbeddingError, VectorStoreMismatch) as exc:
        _set_status(document_id, version, ApiDocument.Status.FAILED, str(exc))
        return IndexResult(status=ApiDocument.Status.FAILED, error=str(exc))
    except VectorStoreError as exc:
        if final_attempt:
            reason = f"vector store unavailable: {exc}"
            _set_status(document_id, version, ApiDocument.Status.FAILED, reason)
            return IndexResult(status=ApiDocument.Status.FAILED, error=reason)
        _set_status(document_id, version, ApiDocument.Status.PENDING, f"will retry: {exc}")
        raise TemporaryIndexError(str(exc)) from exc
    except Exception as exc:
        # Anything unexpected is recorded where staff look, then re-raised for the worker's log.
        _set_status(document_id, version, ApiDocument.Status.FAILED, f"unexpected error: {exc!r}")
        raise

    started = time.perf_counter()
    stale_ids: list[str] = []
    with transaction.atomic():
        current = ApiDocument.objects.select_for_update().filter(id=document_id).first()
        if current is None:
            outcome = IndexResult(status="gone")
        elif current.content_hash != version:
            # Re-uploaded while we worked: that upload queued its own run, which (holding the same
            # lock after us) overwrites these vectors and removes the surplus.
            outcome = IndexResult(status="superseded")
        else:
            previous = DocumentChunk.objects.filter(document_id=document_id)
            stale_ids = [
                chunk_id_for(doc_key, i)
                for i in previous.values_list("chunk_index", flat=True)
                if i >= len(chunks)
            ]
            previous.delete()
            DocumentChunk.objects.bulk_create(chunk_rows(document_id, chunks))
            current.status = ApiDocument.Status.INDEXED
            current.error = ""
            current.chunk_count = len(chunks)
            current.indexed_at = timezone.now()
            version_fields = document_version_apply(current=current, prepared=prepared)
            current.save(
                update_fields=["status", "error", "chunk_count", "indexed_at", "updated_at", *version_fields]
            )
            transaction.on_commit(lambda: document_indexed(document_id=document_id), robust=True)
            outcome = IndexResult(status=ApiDocument.Status.INDEXED, chunk_count=len(chunks))
    timings["commit_s"] = time.perf_counter() - started

    if outcome.status == "superseded":
        return IndexResult(status="superseded", timings=timings)
    # The old version's surplus vectors go only now, after the new ones are in and committed.
    started = time.perf_counter()
    try:
        if outcome.status == "gone" or recovering:
            stale = document_vectors_prune(doc_key=doc_key)
        else:
            store.delete_chunks(sorted(stale_ids))
            stale = len(stale_ids)
    except VectorStoreError:
        logger.warning("could not delete stale vectors of %s now; queued", doc_key, exc_info=True)
        _queue_prune(doc_key)
        stale = 0
    timings["prune_s"] = time.perf_counter() - started
    return IndexResult(
        status=outcome.status, chunk_count=outcome.chunk_count, stale_deleted=stale, timings=timings
    )


def document_index_failed(*, document_id: int, reason: str) -> None:
    """Record that indexing gave up (the task ran out of retries or time)."""
    ApiDocument.objects.filter(id=document_id).exclude(status=ApiDocument.Status.INDEXED).update(
        status=ApiDocument.Status.FAILED, error=reason[:_MAX_ERROR_CHARS], updated_at=timezone.now()
    )


# --- vectors of deleted or shrunk documents ----------------------------------------------------
def document_vectors_prune(*, doc_key: str) -> int:
    """Delete the vectors of ``doc_key`` that have no DocumentChunk row (all of them when the
    document is gone). Idempotent; returns how many were deleted."""
    store = get_vector_store()
    if not store.exists():
        return 0
    stored = store.chunk_ids(doc_key=doc_key)
    if not stored:
        return 0
    indexes = DocumentChunk.objects.filter(document__doc_key=doc_key).values_list("chunk_index", flat=True)
    keep = {chunk_id_for(doc_key, i) for i in indexes}
    stale = sorted(stored - keep)
    if stale:
        store.delete_chunks(stale)
    return len(stale)


def _queue_prune(doc_key: str) -> None:
    def send() -> None:
        from knowledge.tasks.indexing import prune_document_vectors

        try:
            prune_document_vectors.delay(doc_key)
        except Exception:
            logger.exception("could not queue removal of the vectors of %s", doc_key)

    transaction.on_commit(send)


# --- delete ------------------------------------------------------------------------------------
@transaction.atomic
def document_delete(*, document: ApiDocument) -> None:
    """Delete a document, its chunks and (once that is committed) its vectors."""
    doc_key, domain_id = document.doc_key, document.domain
    document.delete()
    _domains_changed(domain_id)

    def remove_vectors() -> None:
        try:
            get_vector_store().delete_document(doc_key)
        except VectorStoreError:
            logger.warning("Milvus unavailable; removal of the vectors of %s queued", doc_key, exc_info=True)
            _queue_prune(doc_key)

    transaction.on_commit(remove_vectors)


# --- re-index ----------------------------------------------------------------------------------
@transaction.atomic
def documents_reindex(*, domain: str | None = None, document_ids: list[int] | None = None) -> int:
    """Queue indexing of every document (or one domain's, or the given ones). Returns how many."""
    documents = ApiDocument.objects.all()
    if domain:
        documents = documents.filter(domain=domain)
    if document_ids is not None:
        documents = documents.filter(id__in=document_ids)
    rows = list(documents.values_list("id", "status", "error"))
    ApiDocument.objects.filter(id__in=[r[0] for r in rows]).update(
        status=ApiDocument.Status.PENDING, error="", updated_at=timezone.now()
    )
    for document_id, status, error in rows:
        # Statuses are reset here, so whether a run must look for leftovers travels with the task.
        _queue_index(document_id, repair=status != ApiDocument.Status.INDEXED or bool(error))
    return len(rows)


def vector_collection_recreate() -> tuple[str, int]:
    """Drop the collection and create it for the configured embedding model (``reindex --recreate``).

    Everything must then be re-indexed: the old vectors are gone.
    """
    embedder = get_embedder()
    store = get_vector_store()
    store.drop()
    store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    return embedder.model_name, embedder.dim


def embedding_collection_check() -> None:
    """Refuse a vector store built with another embedding model or dimension, or before hybrid
    search (no text / BM25 fields) (start-up check).

    Raises VectorStoreMismatch naming the fix (``reindex --recreate``); VectorStoreError when
    Milvus does not answer. A missing collection is fine: the first indexing creates it.
    """
    model_name, dim = embedding_signature()
    store = get_vector_store()
    if not store.exists():
        return
    existing_model, existing_dim = store.describe_embedding()
    if (dim is not None and existing_dim != dim) or (existing_model and existing_model != model_name):
        raise VectorStoreMismatch(
            f"Milvus collection '{store.collection}' holds {existing_dim}-d vectors from "
            f"'{existing_model}', but the configured embedding is {dim or '?'}-d '{model_name}'. "
            "Run `python manage.py reindex --recreate` to rebuild it with the new model, or set "
            "EMBEDDING_BACKEND/EMBEDDING_MODEL back."
        )
    if missing := store.lexical_fields_missing():
        raise VectorStoreMismatch(lexical_fields_message(store.collection, missing))
