"""Pruning a document's vectors that no chunk row backs, as the maintenance and indexing paths
call it (``knowledge.services.vectors.document_vectors_prune``): what it deletes, what it keeps,
and the count it reports, on a real milvus-lite collection and real chunk rows."""

import hashlib

import pytest

from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
from knowledge.services.vectors import document_vectors_prune
from knowledge.vectorstore import ChunkVector

pytestmark = pytest.mark.django_db
DIM = 8


def _vectors(doc_key: str, indexes) -> list[ChunkVector]:
    return [
        ChunkVector(chunk_id_for(doc_key, i), [1.0] + [0.0] * (DIM - 1), "api", doc_key, i, f"chunk {i}")
        for i in indexes
    ]


def _document_with_rows(doc_key: str, indexes, *, status: str = ApiDocument.Status.PENDING) -> ApiDocument:
    document = ApiDocument.objects.create(
        doc_key=doc_key,
        title=doc_key,
        domain="api",
        content="x",
        content_hash=hashlib.sha256(b"x").hexdigest(),
        status=status,
    )
    DocumentChunk.objects.bulk_create(
        DocumentChunk(document=document, chunk_index=i, content=f"chunk {i}") for i in indexes
    )
    return document


def test_without_a_collection_nothing_is_pruned(vector_store):
    assert not vector_store.exists()
    assert document_vectors_prune(doc_key="a.md") == 0
    assert not vector_store.exists()  # nor is one created


def test_vectors_beyond_the_chunk_rows_are_deleted_and_counted_once(vector_store):
    vector_store.ensure_collection(dim=DIM, model_name="unit-test")
    _document_with_rows("a.md", range(3))
    vector_store.upsert(_vectors("a.md", range(5)) + _vectors("b.md", range(2)))
    assert document_vectors_prune(doc_key="a.md") == 2
    assert vector_store.chunk_ids(doc_key="a.md") == {chunk_id_for("a.md", i) for i in range(3)}
    assert vector_store.chunk_ids(doc_key="b.md") == {"b.md#0", "b.md#1"}  # another document's kept
    assert document_vectors_prune(doc_key="a.md") == 0  # idempotent


def test_a_document_gone_loses_every_vector(vector_store):
    vector_store.ensure_collection(dim=DIM, model_name="unit-test")
    vector_store.upsert(_vectors("gone.md", range(3)))
    assert document_vectors_prune(doc_key="gone.md") == 3
    assert vector_store.chunk_ids(doc_key="gone.md") == set()


def test_a_document_without_vectors_prunes_nothing(vector_store):
    vector_store.ensure_collection(dim=DIM, model_name="unit-test")
    _document_with_rows("a.md", range(2))
    assert document_vectors_prune(doc_key="a.md") == 0
