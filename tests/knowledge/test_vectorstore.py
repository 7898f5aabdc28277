import numpy as np
import pytest

from knowledge.vectorstore import ChunkVector, VectorStoreMismatch


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()


def _row(doc_key, idx, vec, domain="infra"):
    return ChunkVector(
        chunk_id=f"{doc_key}#{idx}", vector=vec, domain=domain, doc_key=doc_key, chunk_index=idx
    )


def test_search_returns_the_squared_l2_distance(vector_store):
    vector_store.ensure_collection(dim=4, model_name="test")
    a, b = _unit([1, 0, 0, 0]), _unit([1, 1, 0, 0])
    vector_store.upsert([_row("a.md", 0, a), _row("b.md", 0, b)])
    hits = vector_store.search(a, top_k=2)
    assert [h.doc_key for h in hits] == ["a.md", "b.md"]
    cos = float(np.dot(a, b))
    # Squared Euclidean distance of unit vectors: 2 - 2cos (not its square root).
    assert hits[1].score == pytest.approx(2 - 2 * cos, abs=1e-5)
    assert hits[0].score == pytest.approx(0.0, abs=1e-6)


def test_upsert_is_idempotent_and_delete_by_document_leaves_no_rows(vector_store):
    vector_store.ensure_collection(dim=4, model_name="test")
    rows = [_row("a.md", i, _unit([1, i, 0, 0])) for i in range(3)] + [_row("b.md", 0, _unit([0, 1, 0, 0]))]
    vector_store.upsert(rows)
    vector_store.upsert(rows)
    assert vector_store.count() == 4
    vector_store.delete_document("a.md")
    assert vector_store.count() == 1
    assert vector_store.chunk_ids() == {"b.md#0"}


def test_domain_filter(vector_store):
    vector_store.ensure_collection(dim=4, model_name="test")
    vector_store.upsert(
        [_row("a.md", 0, _unit([1, 0, 0, 0]), "infra"), _row("p.md", 0, _unit([0, 1, 0, 0]), "payments")]
    )
    hits = vector_store.search(_unit([1, 0, 0, 0]), top_k=5, domain="payments")
    assert [h.doc_key for h in hits] == ["p.md"]


def test_keys_with_quotes_are_safe_in_filters(vector_store):
    vector_store.ensure_collection(dim=4, model_name="test")
    key = 'odd "name\\.md'
    vector_store.upsert([_row(key, 0, _unit([1, 0, 0, 0]))])
    assert vector_store.count(doc_key=key) == 1
    vector_store.delete_document(key)
    assert vector_store.count() == 0


def test_another_model_or_dimension_is_refused_with_the_fix_named(vector_store):
    vector_store.ensure_collection(dim=4, model_name="model-a")
    vector_store.ensure_collection(dim=4, model_name="model-a")  # same: fine
    with pytest.raises(VectorStoreMismatch, match="reindex --recreate"):
        vector_store.ensure_collection(dim=8, model_name="model-a")
    with pytest.raises(VectorStoreMismatch, match="model-b"):
        vector_store.ensure_collection(dim=4, model_name="model-b")
