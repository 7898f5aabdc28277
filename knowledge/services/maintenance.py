"""Keeping the database and Milvus in step after failures: nothing lost, nothing left behind.

``documents_pending_requeue``
    Queue indexing of documents left PENDING (the broker was down at upload, a message was lost)
    or INDEXING by a run that died (its lease lapsed: ``knowledge.services.index_lease``).
    Run every ``INGEST_SWEEP_INTERVAL_SECONDS`` by Celery beat and by
    ``python manage.py requeue_pending``.
``index_check``
    Compare api_document / document_chunk with the Milvus collection and the lexical index (when
    it is kept apart: tantivy) and, with ``repair``, fix what differs. Run nightly by Celery beat
    and by ``python manage.py check_index [--repair]``.

Both are safe to run at any time and twice: indexing is idempotent (stable chunk ids, a
per-document lock), and a document being indexed right now is left to its own run.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from config.queueing import registered_task
from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
from knowledge.services.lexical import LexicalReport, lexical_compare, lexical_entries_read, lexical_repair
from knowledge.services.locks import LockTimeout, document_lock
from knowledge.services.reindex import documents_reindex
from knowledge.services.vectors import document_vectors_prune
from knowledge.vectorstore import get_vector_store

logger = logging.getLogger(__name__)

IN_FLIGHT = (ApiDocument.Status.PENDING, ApiDocument.Status.INDEXING)


# --- pending sweep -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RequeueResult:
    queued: list[str]  # doc keys handed to the broker
    failed: list[str]  # doc keys the broker refused (still down): the next sweep tries again
    error: str = ""


#: what a document queued again after its run died says until a run takes it (staff see it)
RUN_DIED = "queued again: the run indexing it stopped without finishing (its worker died?)"


def documents_pending_requeue(*, older_than_seconds: float | None = None) -> RequeueResult:
    """Queue indexing of documents PENDING for ``older_than_seconds`` (default
    ``INGEST_REQUEUE_AFTER_SECONDS``), and at once of documents INDEXING whose run's lease lapsed
    (the run died). An INDEXING document without a lease (a run from before leases) is queued
    once it has been INDEXING for that wait past the task time limit, as before.

    Younger PENDING documents are most likely still in the queue; queueing them again would only
    index them twice (harmless, but work). A document queued here starts its wait again
    (``updated_at``), and one whose run died is PENDING again with ``RUN_DIED`` as its error: the
    next sweeps leave it to the message just sent. A document whose lease is live is left to its
    run. A broker still down changes nothing, so the next sweep tries again.
    """
    index_document = registered_task("knowledge.index_document")
    wait = float(settings.INGEST_REQUEUE_AFTER_SECONDS if older_than_seconds is None else older_than_seconds)
    now = timezone.now()
    pending_before = now - timedelta(seconds=wait)
    indexing_before = now - timedelta(seconds=wait + float(settings.CELERY_TASK_TIME_LIMIT))
    pending = Q(status=ApiDocument.Status.PENDING, updated_at__lte=pending_before)
    run_died = Q(status=ApiDocument.Status.INDEXING) & (
        Q(index_lease_until__lte=now) | Q(index_lease_until__isnull=True, updated_at__lte=indexing_before)
    )
    rows = (
        ApiDocument.objects.filter(pending | run_died).order_by("id").values_list("id", "doc_key", "status")
    )
    queued: list[str] = []
    failed: list[str] = []
    error = ""
    for document_id, doc_key, status in rows:
        if failed:  # the broker refused one: do not wait out its timeout for every other document
            failed.append(doc_key)
            continue
        try:
            # A run that died (INDEXING) may have left vectors: that run must look for them.
            index_document.delay(document_id, repair=status == ApiDocument.Status.INDEXING)
        except Exception as exc:  # kombu raises its own, the transport's and socket errors
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("broker unavailable; %s stays %s for the next sweep: %s", doc_key, status, error)
            failed.append(doc_key)
            continue
        queued.append(doc_key)
        _requeued_mark(document_id, status=status, pending=pending, run_died=run_died)
    if queued:
        logger.info("queued indexing of %d documents left pending: %s", len(queued), ", ".join(queued[:20]))
    return RequeueResult(queued=queued, failed=failed, error=error)


def _requeued_mark(document_id: int, *, status: str, pending: Q, run_died: Q) -> None:
    """Start the queued document's wait again, unless a run took it meanwhile (the conditions
    are those it was selected by: a run that marked it INDEXING holds a live lease)."""
    rows = ApiDocument.objects.filter(id=document_id)
    if status == ApiDocument.Status.PENDING:
        rows.filter(pending).update(updated_at=timezone.now())
    else:
        rows.filter(run_died).update(
            status=ApiDocument.Status.PENDING,
            error=RUN_DIED,
            index_lease_until=None,
            updated_at=timezone.now(),
        )


# --- database vs Milvus ------------------------------------------------------------------------
@dataclass
class IndexReport:
    """What differs between the database and Milvus (doc keys / chunk ids, sorted)."""

    documents: int = 0
    chunks: int = 0
    vectors: int = 0
    #: chunk rows of INDEXED documents with no vector: lookups cannot find those chunks
    missing: list[str] = field(default_factory=list)
    #: vectors of documents that no longer exist
    orphaned: list[str] = field(default_factory=list)
    #: vectors of existing documents with no chunk row (left by an older, longer version)
    stale: list[str] = field(default_factory=list)
    #: vectors whose domain is not their document's (a move that did not reach Milvus)
    wrong_domain: list[str] = field(default_factory=list)
    #: documents being indexed now, not checked
    in_flight: list[str] = field(default_factory=list)
    repaired_vectors_deleted: int = 0
    repaired_documents_requeued: list[str] = field(default_factory=list)
    #: the same comparison for the lexical index (knowledge.services.lexical)
    lexical: LexicalReport | None = None
    #: the collection's schema does not match the server (and how to migrate it); nothing else
    #: is then compared, since reading the vectors loads the collection
    schema: str | None = None

    @property
    def ok(self) -> bool:
        vectors_ok = not (self.missing or self.orphaned or self.stale or self.wrong_domain)
        return vectors_ok and self.schema is None and (self.lexical is None or self.lexical.ok)

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "documents": self.documents,
            "chunks": self.chunks,
            "vectors": self.vectors,
            "missing": self.missing,
            "orphaned": self.orphaned,
            "stale": self.stale,
            "wrong_domain": self.wrong_domain,
            "in_flight": self.in_flight,
            "repaired_vectors_deleted": self.repaired_vectors_deleted,
            "repaired_documents_requeued": self.repaired_documents_requeued,
            "lexical": self.lexical.as_dict() if self.lexical is not None else None,
            "schema": self.schema,
        }


def index_check(*, repair: bool = False) -> IndexReport:
    """Compare documents and chunks with Milvus; with ``repair`` delete orphaned and stale vectors
    and queue re-indexing of documents with missing or wrong-domain vectors. The lexical index
    (tantivy) is compared the same way; its repair rewrites the drifted documents' entries from
    their rows, or rebuilds the whole index when it was built by another analyser.

    Milvus is read before the database: a document indexed in between then shows as "missing"
    (a needless re-index), never as "stale" (which would delete fresh vectors). Deletions are
    re-checked per document under its indexing lock. Raises VectorStoreError when Milvus is down.
    """
    store = get_vector_store()
    # Before any read that loads the collection: a Milvus 2.3 server aborts loading a sparse field.
    if problem := store.schema_problem():
        return IndexReport(schema=problem)
    entries = store.entries()
    lexical, lexical_entries = lexical_entries_read()
    documents = {
        doc_key: (document_id, domain, status)
        for document_id, doc_key, domain, status in ApiDocument.objects.values_list(
            "id", "doc_key", "domain", "status"
        )
    }
    expected: dict[str, str] = {}  # chunk id -> doc key, for documents that should have vectors
    backed: set[str] = set()  # chunk ids with a row (any status: a FAILED document keeps its old rows)
    for doc_key, chunk_index in DocumentChunk.objects.values_list("document__doc_key", "chunk_index"):
        chunk_id = chunk_id_for(doc_key, chunk_index)
        backed.add(chunk_id)
        if documents[doc_key][2] == ApiDocument.Status.INDEXED:
            expected[chunk_id] = doc_key

    report = IndexReport(documents=len(documents), chunks=len(backed), vectors=len(entries))
    report.in_flight = sorted(k for k, (_, _, status) in documents.items() if status in IN_FLIGHT)
    in_flight = set(report.in_flight)
    stored: set[str] = set()
    for entry in entries:
        stored.add(entry.chunk_id)
        document = documents.get(entry.doc_key)
        if document is None:
            report.orphaned.append(entry.chunk_id)
        elif entry.doc_key in in_flight:
            continue
        elif entry.chunk_id not in backed:
            report.stale.append(entry.chunk_id)
        elif entry.domain != document[1]:
            report.wrong_domain.append(entry.chunk_id)
    report.missing = sorted(cid for cid, doc_key in expected.items() if cid not in stored)
    for name in ("orphaned", "stale", "wrong_domain"):
        getattr(report, name).sort()
    domains = {doc_key: document[1] for doc_key, document in documents.items()}
    report.lexical = lexical_compare(
        lexical, lexical_entries, domains=domains, backed=backed, expected=expected, in_flight=in_flight
    )

    if repair and not report.ok:
        _index_repair(report, documents=documents, entries_by_id={e.chunk_id: e for e in entries})
        lexical_repair(report.lexical, document_ids={key: document[0] for key, document in documents.items()})
    return report


def _index_repair(report: IndexReport, *, documents: dict, entries_by_id: dict) -> None:
    prune: dict[str, None] = {}
    for chunk_id in report.orphaned + report.stale:
        prune[entries_by_id[chunk_id].doc_key] = None
    deleted = 0
    for doc_key in prune:
        document = documents.get(doc_key)
        if document is None:
            # Gone from the database: every vector of it goes (prune keeps only backed ids).
            deleted += document_vectors_prune(doc_key=doc_key)
            continue
        try:
            # Under the indexing lock: a run starting now cannot have its fresh vectors deleted.
            with document_lock(document_id=document[0], timeout=30):
                if ApiDocument.objects.filter(id=document[0]).exclude(status__in=IN_FLIGHT).exists():
                    deleted += document_vectors_prune(doc_key=doc_key)
        except LockTimeout:
            logger.info("check_index: %s is being indexed; its own run cleans up", doc_key)
    report.repaired_vectors_deleted = deleted

    requeue: dict[str, None] = {}
    for chunk_id in report.missing:
        requeue[chunk_id.rsplit("#", 1)[0]] = None  # chunk ids are "<doc_key>#<index>"
    for chunk_id in report.wrong_domain:
        requeue[entries_by_id[chunk_id].doc_key] = None
    ids_by_key = defaultdict(list)
    for doc_key in requeue:
        if doc_key in documents:
            ids_by_key[doc_key].append(documents[doc_key][0])
    if ids_by_key:
        documents_reindex(document_ids=[i for ids in ids_by_key.values() for i in ids])
    report.repaired_documents_requeued = sorted(ids_by_key)
    logger.info(
        "check_index repaired: %d vectors deleted, %d documents queued for re-indexing",
        deleted,
        len(ids_by_key),
    )
