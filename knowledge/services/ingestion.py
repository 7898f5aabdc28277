"""The ingestion services' public names in one import (scripts, tests and older callers).

The work lives in modules of one concern each; code in this project imports from those:

- ``documents``: store an uploaded file as a document (``document_ingest``), delete one;
- ``index_queue``: queue indexing on commit, one document or many together (``IndexQueue``);
- ``indexing``: chunk, embed, upsert, swap, prune (``document_index``, ``documents_index``);
- ``index_status``: what a run records on the document (statuses, failures, their reasons);
- ``chunk_preparation``: a document's chunks, the text their vectors embed, their rows;
- ``vectors``: pruning and removing vectors, recreating and checking the collection;
- ``reindex``: re-index stored documents (``documents_reindex``).
"""

from knowledge.services.chunk_preparation import (
    chunk_embedding_text,
    chunk_embedding_texts,
    chunk_rows,
    chunk_vectors,
    document_chunks,
)
from knowledge.services.documents import (
    ADDED,
    FAILED,
    UNCHANGED,
    UPDATED,
    IngestResult,
    document_delete,
    document_ingest,
    document_ingest_safely,
)
from knowledge.services.index_queue import IndexQueue
from knowledge.services.index_status import TemporaryIndexError, document_index_failed
from knowledge.services.indexing import IndexResult, document_index, documents_index
from knowledge.services.reindex import documents_reindex
from knowledge.services.vectors import (
    document_vectors_prune,
    embedding_collection_check,
    vector_collection_recreate,
)

__all__ = [
    "ADDED",
    "FAILED",
    "UNCHANGED",
    "UPDATED",
    "IndexQueue",
    "IndexResult",
    "IngestResult",
    "TemporaryIndexError",
    "chunk_embedding_text",
    "chunk_embedding_texts",
    "chunk_rows",
    "chunk_vectors",
    "document_chunks",
    "document_delete",
    "document_index",
    "document_index_failed",
    "document_ingest",
    "document_ingest_safely",
    "document_vectors_prune",
    "documents_index",
    "documents_reindex",
    "embedding_collection_check",
    "vector_collection_recreate",
]
