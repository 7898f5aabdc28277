"""Indexing tasks: thin wrappers over knowledge.services.indexing and .vectors.

``index_document`` is queued (on commit) by a single upload, re-upload or retry; the bulk paths
(bulk upload, zips, ``import_documents``, ``sync_documents``, ``reindex``) queue
``index_documents`` with up to ``INGEST_INDEX_BATCH_DOCUMENTS`` documents, indexed together so
embedding batches and upserts are filled across documents. Both are safe to run twice (stable
chunk ids, upserts, a per-document lock), retry with backoff only while Milvus is unreachable
(a batch retries only the documents it did not finish), and record every failure in the
document's status. The worker also checks at start-up that the vector store was built with the configured
embedding model (see ``_refuse_mismatched_collection``), and decides and logs its lexical engine.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_init
from django.core.exceptions import ImproperlyConfigured

from knowledge.models import ApiDocument
from knowledge.services.index_queue import index_queue_on_commit
from knowledge.services.index_status import TemporaryIndexError, document_index_failed
from knowledge.services.indexing import document_index, documents_index
from knowledge.services.vectors import document_vectors_prune, embedding_collection_check
from knowledge.vectorstore import VectorStoreError, VectorStoreMismatch, reset_vector_store

logger = logging.getLogger(__name__)

MAX_RETRIES = 5


def _backoff(retries: int) -> int:
    return min(5 * 2**retries, 300)  # 5 s, 10 s, 20 s, 40 s, 80 s


@shared_task(bind=True, name="knowledge.index_document", max_retries=MAX_RETRIES, acks_late=True)
def index_document(self, document_id: int, repair: bool = False) -> str:
    final = self.request.retries >= self.max_retries
    try:
        result = document_index(document_id=document_id, final_attempt=final, repair=repair)
    except TemporaryIndexError as exc:
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
    except SoftTimeLimitExceeded:
        document_index_failed(
            document_id=document_id, reason="indexing took longer than CELERY_TASK_SOFT_TIME_LIMIT"
        )
        raise
    return str(result.status)


@shared_task(bind=True, name="knowledge.index_documents", max_retries=MAX_RETRIES, acks_late=True)
def index_documents(self, entries: list[list]) -> dict[str, str]:
    """``entries``: [document id, repair] pairs. Returns each document's status by id."""
    final = self.request.retries >= self.max_retries
    try:
        batch = documents_index(entries=[(int(i), bool(r)) for i, r in entries], final_attempt=final)
    except TemporaryIndexError as exc:
        left = [[i, r] for i, r in entries if int(i) in set(exc.document_ids)]
        raise self.retry(args=(left,), exc=exc, countdown=_backoff(self.request.retries)) from exc
    except SoftTimeLimitExceeded:
        # One slow file must not fail the others: each document this run did not finish gets a
        # run of its own (with its own time limit), which also clears what this one left.
        ids = [int(i) for i, _ in entries]
        unfinished = ApiDocument.objects.filter(
            id__in=ids, status__in=[ApiDocument.Status.PENDING, ApiDocument.Status.INDEXING]
        ).values_list("id", flat=True)
        for document_id in unfinished:
            index_queue_on_commit(document_id, repair=True)
        raise
    return {str(i): str(result.status) for i, result in batch.results.items()}


@shared_task(bind=True, name="knowledge.prune_document_vectors", max_retries=MAX_RETRIES, acks_late=True)
def prune_document_vectors(self, doc_key: str) -> int:
    """Delete vectors of ``doc_key`` that no chunk row backs (after a delete or a shrink)."""
    try:
        return document_vectors_prune(doc_key=doc_key)
    except VectorStoreError as exc:
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


class EmbeddingMismatchRefused(SystemExit):
    """Raised at worker start-up: a SystemExit, so Celery stops instead of logging and going on."""


@worker_init.connect
def _refuse_mismatched_collection(sender=None, **kwargs) -> None:
    """Stop the worker, before it takes any task, when the Milvus collection holds another
    embedding model's vectors: indexing into it would mix incomparable vectors or fail on the
    dimension. Milvus not answering yet (``make run`` starts it beside the worker) is no reason
    to stop: indexing retries until it answers.
    """
    try:
        for _attempt in range(10):
            try:
                embedding_collection_check()
                return
            except VectorStoreMismatch as exc:
                logger.critical("refusing to start: %s", exc)
                raise EmbeddingMismatchRefused(f"agentkb worker refused to start: {exc}") from exc
            except VectorStoreError:
                time.sleep(1)
            except Exception:  # a misconfigured backend shows on the first task, with its reason
                logger.exception("embedding start-up check could not run")
                return
        logger.warning("Milvus did not answer at worker start; indexing tasks will retry until it does")
    finally:
        try:
            _decide_lexical_engine()
        finally:
            # This runs in the parent before the pool forks: a gRPC channel (or a milvus-lite file
            # lock) must not be inherited by the children.
            reset_vector_store()


def _decide_lexical_engine() -> None:
    """Decide (and log) where the lexical index lives before the pool forks; the children inherit
    the decision. Nothing is opened here: the tantivy index opens in each child on first use."""
    from knowledge.lexical import get_lexical_engine

    try:
        get_lexical_engine()
    except VectorStoreError:
        logger.warning("Milvus did not answer at worker start; the lexical engine is decided on first use")
    except ImproperlyConfigured as exc:
        logger.critical("refusing to start: %s", exc)
        raise EmbeddingMismatchRefused(f"agentkb worker refused to start: {exc}") from exc
