"""Vectors no chunk row backs, and the collection itself: prune, remove, recreate, check.

Indexing writes vectors (``knowledge.services.indexing``); everything that deletes them outside
an indexing run is here. A delete that finds Milvus unreachable is queued as the
``knowledge.prune_document_vectors`` task, which retries until Milvus answers: vectors of a
deleted or failed document never stay behind for good. The lexical index follows the same rows:
a prune also rewrites the document's lexical entries from its chunk rows, and a deleted
document's entries go with its vectors (``knowledge.services.lexical``).
"""

from __future__ import annotations

import logging

from django.db import transaction

from config.queueing import task_queue_on_commit
from knowledge.embeddings import embedding_signature, get_embedder
from knowledge.models import DocumentChunk, chunk_id_for
from knowledge.services.lexical import document_lexical_remove, document_lexical_sync
from knowledge.vectorstore import (
    VectorStoreError,
    VectorStoreMismatch,
    get_vector_store,
    lexical_fields_message,
)

logger = logging.getLogger(__name__)


def document_vectors_prune(*, doc_key: str) -> int:
    """Delete the vectors of ``doc_key`` that have no DocumentChunk row (all of them when the
    document is gone). Idempotent; returns how many were deleted. Its lexical entries become its
    chunk rows too (none when the document is gone)."""
    document_lexical_sync(doc_key=doc_key)
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


def document_vectors_prune_or_queue(*, doc_key: str) -> int:
    """document_vectors_prune now, or (Milvus unreachable) queued for the task to retry."""
    try:
        return document_vectors_prune(doc_key=doc_key)
    except VectorStoreError:
        logger.warning("could not delete stale vectors of %s now; queued", doc_key, exc_info=True)
        vectors_prune_queue(doc_key)
        return 0


def vectors_prune_queue(doc_key: str) -> None:
    """Queue the pruning of ``doc_key``'s vectors once the surrounding transaction commits."""
    task_queue_on_commit(
        "knowledge.prune_document_vectors",
        args=(doc_key,),
        on_error=lambda _exc: logger.exception("could not queue removal of the vectors of %s", doc_key),
    )


def document_vectors_remove_on_commit(doc_key: str) -> None:
    """Once the deletion of ``doc_key``'s row commits, delete all its vectors (or queue that)."""

    def remove_vectors() -> None:
        try:
            get_vector_store().delete_document(doc_key)
            document_lexical_remove(doc_key=doc_key)
        except VectorStoreError:
            logger.warning("Milvus unavailable; removal of the vectors of %s queued", doc_key, exc_info=True)
            vectors_prune_queue(doc_key)

    transaction.on_commit(remove_vectors)


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
            "Run `.venv/bin/python manage.py reindex --recreate` to rebuild it with the new model, or set "
            "EMBEDDING_BACKEND/EMBEDDING_MODEL back."
        )
    if missing := store.lexical_fields_missing():
        raise VectorStoreMismatch(lexical_fields_message(store.collection, missing))
