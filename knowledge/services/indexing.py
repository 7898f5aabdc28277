"""Index documents: chunk, embed, upsert the vectors, swap the chunk rows and mark INDEXED, then
delete the vectors of chunks that no longer exist. The work of the indexing tasks.

``documents_index`` indexes several documents in one run (``knowledge.index_documents``, queued
by the bulk paths); ``document_index`` is the same run for one (``knowledge.index_document``).
A run goes through its documents in phases, so the model and Milvus see full batches:

0. the run's lease on its documents is renewed from a thread while it works
   (``knowledge.services.index_lease``): a run that dies is requeued by the sweep in a minute;
1. every document locked (a lock each), then read and marked INDEXING (taking the lease) in a few
   queries for the run; per document: prepare the new version (a converted format goes through
   one sandbox child reused for the run), chunk it;
2. every chunk of every document embedded in batches of ``EMBEDDING_BATCH_SIZE``; when that
   fails, each document is embedded on its own, so only the documents that fail end FAILED;
3. one upsert of all the vectors (from a thread) while the documents' lexical entries are written
   in one commit (the tantivy index on the embedded default; ``knowledge.services.lexical``);
4. one savepoint of the run's one transaction swaps every document's DocumentChunk rows, sets
   the new versions' title and text and marks them INDEXED (``indexed_at``) in a few queries;
   when that fails, each document is swapped in a savepoint of its own, so only the one at fault
   fails. Once that commits, the surplus old vectors are deleted.

Guarantees, per document, whatever happens to the others of its run:

- a document that fails ends FAILED with the reason and leaves no vector of its new version
  behind: a failure before the upsert writes nothing to Milvus; a failure after it deletes the
  vectors no chunk row backs (or queues that, when Milvus does not answer);
- a re-index swaps in atomically: until step 4 commits, the old chunk rows, text and vectors
  answer lookups (the new vectors overwrite the old ones under the same ids, ``<doc_key>#<i>``);
- a document whose lock another run holds is not waited for in a batch: it gets a run of its
  own, queued at once;
- a re-upload that overtakes the run wins: the run leaves that document to the re-upload's run.

Milvus unreachable (temporary) raises TemporaryIndexError naming the documents still to do,
unless ``final_attempt``, when they end FAILED with the reason.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from concurrent.futures import Future, wait
from contextlib import ExitStack
from dataclasses import dataclass, field, replace

import numpy as np
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from knowledge.chunking import Chunk
from knowledge.converters import ConversionError
from knowledge.embeddings import EmbeddingError, get_embedder
from knowledge.models import ApiDocument, DocumentChunk, DocumentOriginal, chunk_id_for
from knowledge.parsing import ParsedDocument
from knowledge.services.chunk_preparation import (
    chunk_embedding_texts,
    chunk_rows,
    chunk_vectors,
    document_chunks,
)
from knowledge.services.document_metadata import documents_indexed
from knowledge.services.index_lease import index_lease_renewed
from knowledge.services.index_queue import index_queue_on_commit
from knowledge.services.index_status import (
    TemporaryIndexError,
    document_index_failed,
    document_status_set,
    documents_indexing_started,
    unexpected_reason,
)
from knowledge.services.lexical import documents_lexical_prepare, documents_lexical_write
from knowledge.services.locks import LockTimeout, document_busy, document_lock, documents_locked
from knowledge.services.vectors import (
    document_vectors_prune,
    document_vectors_prune_or_queue,
    vectors_prune_queue,
)
from knowledge.services.versions import (
    document_originals_known,
    document_version_apply,
    document_version_prepare,
    document_version_refused,
    metadata_merged,
    version_sandbox,
)
from knowledge.thread_pools import ProcessThreadPool
from knowledge.vectorstore import VectorStoreError, VectorStoreMismatch, get_vector_store

logger = logging.getLogger(__name__)

#: how long a run of one document waits for another run of it to finish
LOCK_WAIT_SECONDS = 600.0

INDEXED, FAILED = ApiDocument.Status.INDEXED, ApiDocument.Status.FAILED
SUPERSEDED, GONE, DEFERRED = "superseded", "gone", "deferred"


@dataclass(frozen=True)
class IndexResult:
    #: INDEXED / FAILED, or superseded / gone (nothing to finish) / deferred (left to its own run)
    status: str
    chunk_count: int = 0
    error: str = ""
    stale_deleted: int = 0
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchResult:
    results: dict[int, IndexResult]
    #: seconds per phase, for the whole run (chunk_s, embed_s, upsert_s, commit_s, prune_s), and
    #: the parts of a phase as "<phase>.<part>_s" (counted in their phase already)
    timings: dict[str, float]


@dataclass
class _Run:
    """One document's way through a run."""

    document_id: int
    repair: bool
    document: ApiDocument | None = None
    version: str = ""
    recovering: bool = False
    prepared: ParsedDocument | None = None
    chunks: list[Chunk] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    vectors: np.ndarray | None = None
    stale_ids: list[str] = field(default_factory=list)
    #: set once this document's run has ended (early, or after its swap)
    result: IndexResult | None = None

    @property
    def doc_key(self) -> str:
        return self.document.doc_key if self.document is not None else ""

    def fail(self, reason: str) -> None:
        if self.version:
            document_status_set(self.document_id, self.version, FAILED, reason)
        else:  # failed before its row was read
            document_index_failed(document_id=self.document_id, reason=reason)
        self.result = IndexResult(status=FAILED, error=reason)


def document_index(*, document_id: int, final_attempt: bool = True, repair: bool = False) -> IndexResult:
    """Index one document (see the module docstring). Safe to run twice (same ids, same vectors).

    Permanent failures (the model fails, the collection was built for another model) end FAILED
    with the reason. ``repair`` (or a document left INDEXING/FAILED/with an error) makes the run
    also delete vectors of the document that no chunk row backs, which costs a Milvus query.
    """
    batch = documents_index(entries=[(document_id, repair)], final_attempt=final_attempt)
    return replace(batch.results[document_id], timings=batch.timings)


def documents_index(*, entries: list[tuple[int, bool]], final_attempt: bool) -> BatchResult:
    """Index the documents of ``entries`` ((id, repair) pairs) together; a result per document.

    ``final_attempt``: no retry follows (Milvus down fails the documents instead of raising
    TemporaryIndexError for the task to retry); every caller says which it is."""
    runs = [_Run(document_id=i, repair=r) for i, r in _merged(entries)]
    alone = len(runs) == 1
    timings: dict[str, float] = defaultdict(float)
    with ExitStack() as held:
        # The run's lease on its documents, renewed while it works: a worker that dies mid-run
        # stops renewing, and the sweep queues its documents again within a minute.
        held.enter_context(index_lease_renewed(document_ids=[r.document_id for r in runs]))
        sandbox = held.enter_context(version_sandbox())
        if alone:  # a run of one document waits for another run of it to end
            try:
                held.enter_context(document_lock(document_id=runs[0].document_id, timeout=LOCK_WAIT_SECONDS))
            except LockTimeout as exc:
                _lock_busy(runs[0], exc, alone=alone, final_attempt=final_attempt)
        else:  # a batch does not wait: a document another run holds gets a run of its own
            taken = held.enter_context(documents_locked(document_ids=[r.document_id for r in runs]))
            for run in runs:
                if run.document_id not in taken:
                    _lock_busy(run, document_busy(run.document_id), alone=alone, final_attempt=final_attempt)
        locked = [r for r in runs if r.result is None]
        originals = _started(locked, alone)
        for run in locked:
            if run.result is None:
                _isolated(run, alone, lambda r=run: _prepare(r, sandbox, originals, timings))
        ready = [r for r in runs if r.result is None]
        # The chunk texts analysed for the lexical index while the embedder runs (most of a
        # lexical write's cost); written with the vectors, for the runs that got them.
        analysed = documents_lexical_prepare([(r.document, r.chunks, r.texts) for r in ready])
        _embed(ready, alone, timings)
        _upsert([r for r in runs if r.result is None], alone, final_attempt, timings, analysed)
        swapped = [r for r in runs if r.result is None]
        # One commit for the run; each document's swap is a savepoint of it, so one that fails
        # rolls back alone (and is recorded FAILED) while the others' swaps commit together.
        # A run of one document re-raises its failure (for the worker's log) only after that
        # commit: raised inside the block, it would roll back the FAILED status and reason too.
        failure: Exception | None = None
        with transaction.atomic():
            if len(swapped) < 2 or not _swapped_together(swapped, timings):
                for run in swapped:
                    try:
                        _isolated(run, alone, lambda r=run: _swap(r, timings), after_upsert=True)
                    except Exception as exc:
                        failure = exc
        if swapped:  # summaries and domain refreshes, each domain of the batch once; it reads each
            # document's status, so only those now INDEXED report
            swapped_ids = [r.document_id for r in swapped]
            transaction.on_commit(lambda: documents_indexed(document_ids=swapped_ids), robust=True)
        if failure is not None:
            raise failure
        _prune([r for r in swapped if r.result.status in (INDEXED, GONE)], timings)
    return BatchResult(results={r.document_id: r.result for r in runs}, timings=dict(timings))


def _merged(entries) -> list[tuple[int, bool]]:
    merged: dict[int, bool] = {}
    for document_id, repair in entries:
        merged[int(document_id)] = merged.get(int(document_id), False) or bool(repair)
    return sorted(merged.items())


def _lock_busy(run: _Run, exc: LockTimeout, *, alone: bool, final_attempt: bool) -> None:
    if not alone:
        # Another run of this document is under way: a run of its own waits for it, after.
        index_queue_on_commit(run.document_id, repair=run.repair)
        run.result = IndexResult(status=DEFERRED, error=str(exc))
    elif final_attempt:
        document_index_failed(document_id=run.document_id, reason=f"gave up waiting: {exc}")
        run.result = IndexResult(status=FAILED, error=str(exc))
    else:
        raise TemporaryIndexError(str(exc), document_ids=[run.document_id]) from exc


def _isolated(run: _Run, alone: bool, step, *, after_upsert: bool = False) -> None:
    """Run one document's step; anything unexpected fails that document only, with the reason
    recorded where staff look (and re-raised for the worker's log when it is the run's only one)."""
    try:
        step()
    except Exception as exc:
        logger.exception("indexing document %s failed", run.document_id)
        try:
            run.fail(unexpected_reason(exc))
            if after_upsert and run.doc_key:
                # Its new vectors are in Milvus but no chunk row of this version backs them.
                document_vectors_prune_or_queue(doc_key=run.doc_key)
        except Exception:
            logger.exception("could not record the failure of document %s", run.document_id)
        if alone:
            raise


def _started(runs: list[_Run], alone: bool) -> dict[int, DocumentOriginal]:
    """Read the locked documents and mark them INDEXING (taking the lease), a few queries for the
    whole run; returns their stored originals (without the bytes) for ``_prepare``. A document
    gone meanwhile ends GONE, one re-uploaded meanwhile SUPERSEDED. When the database fails here,
    every document of the run fails with the reason."""
    if not runs:
        return {}
    try:
        documents = ApiDocument.objects.in_bulk([r.document_id for r in runs])
        for run in runs:
            document = documents.get(run.document_id)
            if document is None:
                run.result = IndexResult(status=GONE)
                continue
            run.document, run.version = document, document.content_hash
            # A run that died mid-way (INDEXING left behind), failed or is being retried may have
            # left vectors no chunk row knows of: such a run asks Milvus what the document holds. A
            # normal run knows its stale ids from the previous chunk rows, which spares a Milvus
            # query per document.
            run.recovering = (
                run.repair or document.status in (ApiDocument.Status.INDEXING, FAILED) or bool(document.error)
            )
        found = [r for r in runs if r.result is None]
        started = documents_indexing_started({r.document_id: r.version for r in found})
        for run in found:
            if run.document_id not in started:
                run.result = IndexResult(status=SUPERSEDED)
        return document_originals_known(document_ids=sorted(started))
    except Exception as exc:
        logger.exception("starting the indexing of %d documents failed", len(runs))
        for run in runs:
            if run.result is None:
                try:
                    run.fail(unexpected_reason(exc))
                except Exception:
                    logger.exception("could not record the failure of document %s", run.document_id)
        if alone:
            raise
        return {}


def _prepare(run: _Run, sandbox, originals: dict[int, DocumentOriginal], timings: dict[str, float]) -> None:
    document = run.document
    try:  # a re-upload's text (PDF, DOCX...: converted in a sandbox), swapped in with its chunks
        run.prepared = document_version_prepare(document=document, sandbox=sandbox, originals=originals)
    except ConversionError as exc:
        document_version_refused(document=document, version=run.version, reason=exc.reason)
        run.result = IndexResult(status=FAILED, error=exc.reason)
        return
    if run.prepared is not None:
        document.title, document.content = run.prepared.title, run.prepared.body
        document.metadata = metadata_merged(document.metadata, run.prepared)
    started = time.perf_counter()
    run.chunks = document_chunks(document)
    run.texts = chunk_embedding_texts(document, run.chunks)
    timings["chunk_s"] += time.perf_counter() - started


def _embed(runs: list[_Run], alone: bool, timings: dict[str, float]) -> None:
    """Every chunk of ``runs`` embedded before anything is written: a failure leaves Milvus as it was."""
    if not runs:
        return
    started = time.perf_counter()
    try:
        vectors = _encode([t for r in runs for t in r.texts])
    except SoftTimeLimitExceeded:
        # The run's time is up (embedding is its slow step): not a document's fault. Raised to
        # the task, which gives each unfinished document a run of its own.
        raise
    except Exception as exc:
        if alone:
            _embedding_failed(runs[0], exc, alone=True)
        else:
            # Which document's text broke the batch? Each on its own: only those fail.
            for run in runs:
                try:
                    run.vectors = _encode(run.texts)
                except Exception as one:
                    _embedding_failed(run, one, alone=False)
    else:
        offset = 0
        for run in runs:
            run.vectors = vectors[offset : offset + len(run.texts)]
            offset += len(run.texts)
    timings["embed_s"] += time.perf_counter() - started


def _encode(texts: list[str]) -> np.ndarray:
    return get_embedder().encode(texts, batch_size=settings.EMBEDDING_BATCH_SIZE)


def _embedding_failed(run: _Run, exc: Exception, *, alone: bool) -> None:
    if isinstance(exc, EmbeddingError):
        run.fail(str(exc))
        return
    logger.exception("embedding document %s failed", run.document_id)
    run.fail(unexpected_reason(exc))
    if alone:
        raise exc


def _upsert(
    runs: list[_Run],
    alone: bool,
    final_attempt: bool,
    timings: dict[str, float],
    analysed: Future | None = None,
) -> None:
    if not runs:
        return
    started = time.perf_counter()
    try:
        embedder = get_embedder()
        store = get_vector_store()
        store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
        rows = [
            row for r in runs for row in chunk_vectors(r.document, r.chunks, vectors=r.vectors, texts=r.texts)
        ]
        # The vectors go to Milvus from a thread while this one writes the same texts, analysed,
        # to the lexical index in one commit: the upsert mostly waits on Milvus, the lexical
        # commit on tantivy, so together they take the longer of the two, not the sum. Both end
        # before anything else happens; a LexicalIndexError is a VectorStoreError. When the
        # vectors fail and the lexical entries landed, the retry rewrites them, or (the run
        # given up) the prune queued below syncs them with the chunk rows.
        upserted = _vector_writes.submit(store.upsert, rows)
        # The stage's parts, as "upsert.<part>_s" (a part of the upsert stage, not a stage of
        # its own): which of the analysis, tantivy and Milvus the stage waited on.
        mark = time.perf_counter()
        try:
            if analysed is not None:
                analysed.result()  # the analysis started before the embedding, if still running
            timings["upsert.analysis_wait_s"] += time.perf_counter() - mark
            mark = time.perf_counter()
            documents_lexical_write([(r.document, r.chunks, r.texts) for r in runs], prepared=analysed)
            timings["upsert.lexical_write_s"] += time.perf_counter() - mark
        finally:
            mark = time.perf_counter()
            wait([upserted])
            timings["upsert.vectors_wait_s"] += time.perf_counter() - mark
        upserted.result()
    except (EmbeddingError, VectorStoreMismatch) as exc:
        for run in runs:
            run.fail(str(exc))
    except VectorStoreError as exc:
        if not final_attempt:
            for run in runs:
                document_status_set(
                    run.document_id, run.version, ApiDocument.Status.PENDING, f"will retry: {exc}"
                )
            raise TemporaryIndexError(str(exc), document_ids=[r.document_id for r in runs]) from exc
        for run in runs:
            run.fail(f"vector store unavailable: {exc}")
            # Part of the upsert may have landed: pruned once Milvus answers (no chunk row backs it).
            vectors_prune_queue(run.doc_key)
    except Exception as exc:
        logger.exception("upserting the vectors of %d documents failed", len(runs))
        for run in runs:
            run.fail(unexpected_reason(exc))
            vectors_prune_queue(run.doc_key)
        if alone:
            raise
    timings["upsert_s"] += time.perf_counter() - started


#: the threads that send a run's vectors to Milvus; two, so runs of one process in threads never
#: queue behind each other
_vector_writes = ProcessThreadPool(max_workers=2, thread_name_prefix="agentkb-vectors")


def _swap(run: _Run, timings: dict[str, float]) -> None:
    """One document's swap: what a batch falls back to when swapping it together failed."""
    _swap_runs([run], timings)


def _swapped_together(runs: list[_Run], timings: dict[str, float]) -> bool:
    """Every run's swap in one savepoint and a handful of queries for the whole batch, not five per
    document. False when anything failed: the savepoint is rolled back and each document is then
    swapped alone (``_swap``), so only the one at fault fails."""
    try:
        _swap_runs(runs, timings)
    except Exception:
        logger.warning(
            "swapping %d documents together failed; each is swapped alone", len(runs), exc_info=True
        )
        for run in runs:
            run.result, run.stale_ids = None, []
        return False
    return True


def _swap_runs(runs: list[_Run], timings: dict[str, float]) -> None:
    """The new chunk rows, text and status of ``runs`` in one savepoint; lookups see all or
    nothing. The row locks, the old chunk rows read and deleted and the new ones written: each one
    query, whatever the number of runs (and one more for the new versions' text, when there are)."""
    started = time.perf_counter()
    with transaction.atomic():
        ids = [r.document_id for r in runs]
        currents = {
            d.id: d
            for d in ApiDocument.objects.select_for_update()
            .filter(id__in=ids)
            .only("id", "content_hash", "metadata")
            .order_by("id")
        }
        for run in runs:
            current = currents.get(run.document_id)
            if current is None:
                run.result = IndexResult(status=GONE)
            elif current.content_hash != run.version:
                # Re-uploaded while we worked: that upload queued its own run, which (holding the
                # same lock after us) overwrites these vectors and removes the surplus.
                run.result = IndexResult(status=SUPERSEDED)
        proceeding = [r for r in runs if r.result is None]
        previous: dict[int, list[int]] = defaultdict(list)
        chunked = DocumentChunk.objects.filter(document_id__in=[r.document_id for r in proceeding])
        for document_id, index in chunked.values_list("document_id", "chunk_index"):
            previous[document_id].append(index)
        chunked.delete()
        DocumentChunk.objects.bulk_create(
            [row for r in proceeding for row in chunk_rows(r.document_id, r.chunks)], batch_size=500
        )
        now = timezone.now()
        # INDEXED in one UPDATE whose only CASE is the chunk count, by distinct count (a few a
        # batch): bulk_update's CASE per row and field cost more than the rest of the swap.
        by_count: dict[int, list[int]] = defaultdict(list)
        versioned: list[ApiDocument] = []
        fields: set[str] = set()
        for run in proceeding:
            run.stale_ids = [
                chunk_id_for(run.doc_key, i) for i in previous[run.document_id] if i >= len(run.chunks)
            ]
            by_count[len(run.chunks)].append(run.document_id)
            current = currents[run.document_id]
            if changed := document_version_apply(current=current, prepared=run.prepared):
                versioned.append(current)
                fields.update(changed)
        counts = [When(id__in=same, then=Value(count)) for count, same in sorted(by_count.items())]
        ApiDocument.objects.filter(id__in=[r.document_id for r in proceeding]).update(
            status=INDEXED,
            error="",
            chunk_count=Case(*counts, default=F("chunk_count")),
            indexed_at=now,
            index_lease_until=None,
            updated_at=now,
        )
        if versioned:  # a new version's title, text and metadata (re-uploads, converted files)
            ApiDocument.objects.bulk_update(versioned, sorted(fields))
        for run in proceeding:
            run.result = IndexResult(status=INDEXED, chunk_count=len(run.chunks))
    timings["commit_s"] += time.perf_counter() - started


def _prune(runs: list[_Run], timings: dict[str, float]) -> None:
    """The old versions' surplus vectors go only now, after the new ones are in and committed."""
    if not runs:
        return
    started = time.perf_counter()
    deleted: dict[int, int] = {}
    known = [r for r in runs if r.result.status == INDEXED and not r.recovering]
    stale = sorted(i for r in known for i in r.stale_ids)
    try:
        if stale:
            get_vector_store().delete_chunks(stale)
        deleted.update({r.document_id: len(r.stale_ids) for r in known})
    except VectorStoreError:
        logger.warning(
            "could not delete stale vectors of %d documents now; queued", len(known), exc_info=True
        )
        for run in known:
            vectors_prune_queue(run.doc_key)
    for run in runs:
        if run in known:
            continue
        # Gone while we worked, or a run after a failure: ask Milvus what the document holds.
        try:
            deleted[run.document_id] = document_vectors_prune(doc_key=run.doc_key)
        except VectorStoreError:
            logger.warning("could not delete stale vectors of %s now; queued", run.doc_key, exc_info=True)
            vectors_prune_queue(run.doc_key)
    for run in runs:
        run.result = IndexResult(
            status=run.result.status,
            chunk_count=run.result.chunk_count,
            stale_deleted=deleted.get(run.document_id, 0),
        )
    timings["prune_s"] += time.perf_counter() - started
