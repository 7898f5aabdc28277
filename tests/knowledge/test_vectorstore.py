import numpy as np
import pytest

from knowledge.vectorstore import ChunkVector, VectorStoreMismatch
from tests.support.small_domain import sealed_and_loaded, small_domain_searched


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
    assert hits[1].l2_distance == pytest.approx(2 - 2 * cos, abs=1e-5)
    assert hits[0].l2_distance == pytest.approx(0.0, abs=1e-6)


def test_upsert_is_idempotent_and_delete_by_document_leaves_no_rows(vector_store):
    vector_store.ensure_collection(dim=4, model_name="test")
    rows = [_row("a.md", i, _unit([1, i, 0, 0])) for i in range(3)] + [_row("b.md", 0, _unit([0, 1, 0, 0]))]
    vector_store.upsert(rows)
    vector_store.upsert(rows)
    assert vector_store.count() == 4
    vector_store.delete_document("a.md")
    assert vector_store.count() == 1
    assert vector_store.chunk_ids() == {"b.md#0"}


def test_an_upsert_over_several_requests_stores_every_field_of_every_row_as_given(vector_store):
    """The rows go to Milvus as columns, 500 a request (``knowledge.milvus_columns``): each value
    lands in its own row, across request boundaries, texts cut to the field's limit."""
    from knowledge.vectorstore import TEXT_MAX_CHARS

    vector_store.ensure_collection(dim=4, model_name="test")
    # Distinct vectors: with the 30 distinct ones this test once had for 1,203 rows, milvus-lite's
    # HNSW (built a few seconds after the write) left the one row of long.md unreachable, even
    # unfiltered: faiss prunes a node's edges among points it cannot tell apart.
    rng = np.random.default_rng(1203)
    rows = [
        ChunkVector(
            chunk_id=f"doc{n % 7}.md#{n}",
            vector=_unit(rng.normal(size=4).tolist()),
            domain=f"domain-{n % 3}",
            doc_key=f"doc{n % 7}.md",
            chunk_index=n,
            text=f"第{n}段 row {n} " + "正文" * (n % 4),
        )
        for n in range(1203)
    ]
    long_text = "长" * (TEXT_MAX_CHARS + 50)
    rows[-1] = ChunkVector("long.md#0", _unit([0, 0, 0, 1]), "domain-x", "long.md", 0, text=long_text)
    vector_store.upsert(rows)

    assert {(e.chunk_id, e.doc_key, e.domain, e.chunk_index) for e in vector_store.entries()} == {
        (r.chunk_id, r.doc_key, r.domain, r.chunk_index) for r in rows
    }
    sealed_and_loaded(vector_store)  # the searches below meet the graph index every time
    sample = [rows[0], rows[499], rows[500], rows[1000], rows[1201]]
    stored = vector_store.vectors([r.chunk_id for r in sample])
    for row in sample:
        assert stored[row.chunk_id] == pytest.approx(row.vector, abs=1e-6)

    # Each search is filtered to one document, so it says what share of the rows that keeps (once
    # milvus-lite has built its graph index, a search filtered to a small share needs it:
    # test_a_filtered_search_on_the_graph_index_finds_rows_of_a_small_domain).
    def share(doc_key):
        return sum(1 for r in rows if r.doc_key == doc_key) / len(rows)

    for row in sample:
        hits = vector_store.search(
            row.vector, top_k=500, doc_keys=[row.doc_key], with_text=True, filter_share=share(row.doc_key)
        )
        assert {h.chunk_id: h.text for h in hits}[row.chunk_id] == row.text
    (hit,) = vector_store.search(
        rows[-1].vector, top_k=1, doc_keys=["long.md"], with_text=True, filter_share=share("long.md")
    )
    assert hit.text == long_text[:TEXT_MAX_CHARS]


def test_domain_filter(vector_store):
    vector_store.ensure_collection(dim=4, model_name="test")
    vector_store.upsert(
        [_row("a.md", 0, _unit([1, 0, 0, 0]), "infra"), _row("p.md", 0, _unit([0, 1, 0, 0]), "payments")]
    )
    hits = vector_store.search(_unit([1, 0, 0, 0]), top_k=5, domain="payments")
    assert [h.doc_key for h in hits] == ["p.md"]


def test_the_doc_keys_filter_holds_with_and_without_a_domain(vector_store):
    vector_store.ensure_collection(dim=4, model_name="test")
    vector_store.upsert(
        [
            _row("a.md", 0, _unit([1, 0, 0, 0]), "infra"),
            _row("b.md", 0, _unit([1, 0.1, 0, 0]), "infra"),
            _row('odd "q.md', 0, _unit([1, 0.2, 0, 0]), "payments"),
        ]
    )
    query = _unit([1, 0, 0, 0])
    assert [h.doc_key for h in vector_store.search(query, top_k=1, doc_keys={"b.md"})] == ["b.md"]
    found = vector_store.search(query, top_k=5, domain={"infra"}, doc_keys={"b.md", 'odd "q.md'})
    assert [h.doc_key for h in found] == ["b.md"]
    assert [h.doc_key for h in vector_store.search(query, top_k=5, doc_keys={'odd "q.md'})] == ['odd "q.md']
    assert vector_store.search(query, top_k=5, doc_keys=set()) == []


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


def test_the_collection_check_is_made_once_a_minute_per_model_and_forgotten_on_drop(
    vector_store, monkeypatch
):
    import knowledge.vectorstore as vs

    calls: list[str] = []
    real_call = vector_store._call

    def counted(method, *args, **kwargs):
        calls.append(method)
        return real_call(method, *args, **kwargs)

    monkeypatch.setattr(vector_store, "_call", counted)
    # Given a collection checked once
    vector_store.ensure_collection(dim=4, model_name="model-a")
    # When a bulk ingest asks again before each batch, then Milvus is not asked again
    checked = len(calls)
    for _ in range(5):
        vector_store.ensure_collection(dim=4, model_name="model-a")
    assert len(calls) == checked
    # But another model is checked (and refused) at once
    with pytest.raises(VectorStoreMismatch, match="model-b"):
        vector_store.ensure_collection(dim=4, model_name="model-b")
    # After a drop here the collection is made again
    vector_store.drop()
    vector_store.ensure_collection(dim=4, model_name="model-a")
    assert vector_store.exists()
    # And once the check is older than ENSURED_FOR_S it is made again: a collection rebuilt for
    # another model meanwhile (by another process) is refused
    from knowledge.vectorstore import VectorStore

    other = VectorStore(uri=vector_store.uri, collection=vector_store.collection)
    other.drop()
    other.ensure_collection(dim=8, model_name="model-c")
    monkeypatch.setattr(vs, "ENSURED_FOR_S", 0.0)
    with pytest.raises(VectorStoreMismatch, match="model-c"):
        vector_store.ensure_collection(dim=4, model_name="model-a")
    other.reset()


def test_writes_are_flushed_on_milvus_lite_only_and_searched_at_once_either_way(vector_store, monkeypatch):
    # Given the default (MILVUS_FLUSH_AFTER_WRITE=auto)
    assert vector_store.flush_after_write is None
    calls: list[str] = []
    real_call = vector_store._call

    def counted(method, *args, **kwargs):
        calls.append(method)
        return real_call(method, *args, **kwargs)

    vector_store.ensure_collection(dim=4, model_name="test")
    monkeypatch.setattr(vector_store, "_call", counted)
    # When rows are written: a flush on milvus-lite (it scans unflushed rows slowly), none on a
    # Milvus server (seconds each, and it needs none)
    vector_store.upsert([_row("a.md", 0, _unit([1, 0, 0, 0])), _row("b.md", 0, _unit([0, 1, 0, 0]))])
    assert ("flush" in calls) == vector_store.is_lite
    # Then this process finds them at once, flushed or not
    assert [h.doc_key for h in vector_store.search(_unit([1, 0, 0, 0]), top_k=2)] == ["a.md", "b.md"]
    assert {e.chunk_id for e in vector_store.entries()} == {"a.md#0", "b.md#0"}
    # And the setting forces either way
    vector_store.flush_after_write = False
    calls.clear()
    vector_store.upsert([_row("c.md", 0, _unit([0, 0, 1, 0]))])
    assert "flush" not in calls


def test_a_malformed_flush_setting_is_refused_at_start():
    from tests.support.settings_start import django_setup

    out = django_setup({"MILVUS_FLUSH_AFTER_WRITE": "sometimes"})
    assert out.returncode != 0
    assert "MILVUS_FLUSH_AFTER_WRITE must be auto, true or false; got 'sometimes'" in out.stderr


# --- hybrid search: dense + BM25 in one Milvus request ------------------------------------------
def _text_row(doc_key, vec, text, domain="infra"):
    return ChunkVector(
        chunk_id=f"{doc_key}#0", vector=vec, domain=domain, doc_key=doc_key, chunk_index=0, text=text
    )


def _hybrid_corpus(store):
    store.ensure_collection(dim=4, model_name="test")
    store.upsert(
        [
            _text_row("near.md", _unit([1, 0.1, 0, 0]), "缓存过期策略"),
            _text_row("words.md", _unit([0, 0, 1, 0]), "数据库连接池 maximumPoolSize 的配置"),
            _text_row("other.md", _unit([0, 1, 0, 0]), "退款流程", domain="payments"),
        ]
    )


def test_hybrid_search_finds_by_words_what_the_vector_misses(vector_store, milvus_bm25):
    _hybrid_corpus(vector_store)
    query = _unit([1, 0, 0, 0])
    dense = vector_store.search(query, top_k=1)
    assert [h.doc_key for h in dense] == ["near.md"]
    hits = vector_store.hybrid_search(query, "连接池 maximumPoolSize 怎么配置", top_k=3)
    assert {h.doc_key for h in hits[:2]} == {"near.md", "words.md"}
    assert {h.doc_key: h.text for h in hits}["words.md"] == "数据库连接池 maximumPoolSize 的配置"


def test_hybrid_hits_carry_their_raw_squared_l2_distance(vector_store, milvus_bm25):
    _hybrid_corpus(vector_store)
    query = _unit([1, 0.5, 0, 0])
    dense = {h.doc_key: h.l2_distance for h in vector_store.search(query, top_k=3)}
    for hit in vector_store.hybrid_search(query, "连接池", top_k=3):
        assert hit.l2_distance == pytest.approx(dense[hit.doc_key], abs=1e-5)


@pytest.mark.parametrize("ranker", ["rrf", "weighted"])
def test_hybrid_search_filters_by_domain_with_either_ranker(vector_store, ranker, milvus_bm25):
    _hybrid_corpus(vector_store)
    hits = vector_store.hybrid_search(
        _unit([1, 0, 0, 0]), "连接池 退款", top_k=5, domain="payments", ranker=ranker
    )
    assert [h.doc_key for h in hits] == ["other.md"]


def _old_schema_collection(store, dim=4):
    """A collection as agentkb created it before hybrid search: no text, no BM25 field."""
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=512)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("domain", DataType.VARCHAR, max_length=64)
    schema.add_field("doc_key", DataType.VARCHAR, max_length=255)
    schema.add_field("chunk_index", DataType.INT64)
    index_params = store.client().prepare_index_params()
    index_params.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="L2")
    store.client().create_collection(store.collection, schema=schema, index_params=index_params)
    store.client().alter_collection_properties(
        store.collection, properties={"agentkb.embedding_model": "test", "agentkb.dim": str(dim)}
    )


def test_a_collection_built_before_hybrid_search_is_refused_naming_the_fix(vector_store, milvus_bm25):
    _old_schema_collection(vector_store)
    assert vector_store.lexical_fields_missing() == ["text", "sparse"]
    with pytest.raises(VectorStoreMismatch, match=r"before hybrid search.*reindex --recreate"):
        vector_store.ensure_collection(dim=4, model_name="test")


def test_a_new_collection_has_the_lexical_fields(vector_store, milvus_bm25):
    vector_store.ensure_collection(dim=4, model_name="test")
    assert vector_store.lexical_fields_missing() == []


def test_with_tantivy_beside_it_a_new_collection_keeps_the_text_and_has_no_bm25_field(vector_store, settings):
    settings.LEXICAL_ENGINE = "auto"  # milvus-lite: BM25 lives in the tantivy index beside it
    vector_store.ensure_collection(dim=4, model_name="test")
    fields = {f["name"] for f in vector_store.client().describe_collection(vector_store.collection)["fields"]}
    assert "text" in fields and "sparse" not in fields and vector_store.lexical_fields_missing() == []
    row = ChunkVector(
        chunk_id="a.md#0",
        vector=_unit([1, 0, 0, 0]),
        domain="infra",
        doc_key="a.md",
        chunk_index=0,
        text="连接池",
    )
    vector_store.upsert([row])
    [hit] = vector_store.search(_unit([1, 0, 0, 0]), top_k=1, with_text=True)
    assert hit.text == "连接池" and vector_store.search(_unit([1, 0, 0, 0]), top_k=1)[0].text == ""
    vector_store.ensure_collection(dim=4, model_name="test")  # no BM25 field asked for: no mismatch


@pytest.mark.services
def test_hybrid_search_on_the_loopback_milvus_lite_server(settings, milvus_server, milvus_bm25):
    """The same request through a ``milvus-lite server`` (what web and worker share)."""
    import uuid

    from knowledge.vectorstore import VectorStore

    store = VectorStore(uri=milvus_server, collection=f"t_{uuid.uuid4().hex[:12]}")
    try:
        _hybrid_corpus(store)
        hits = store.hybrid_search(_unit([1, 0, 0, 0]), "连接池 maximumPoolSize 怎么配置", top_k=3)
        assert {h.doc_key for h in hits[:2]} == {"near.md", "words.md"}
        _old = VectorStore(uri=milvus_server, collection=f"t_{uuid.uuid4().hex[:12]}")
        _old_schema_collection(_old)
        assert _old.lexical_fields_missing() == ["text", "sparse"]
        _old.drop()
    finally:
        store.drop()
        store.reset()


def test_a_filtered_search_on_the_graph_index_finds_rows_of_a_small_domain(vector_store):
    """An agent scoped to a domain holding 0.1% of the rows still gets that domain's nearest rows:
    the search says what share its filter keeps, and milvus-lite's HNSW walks far enough to meet
    them (``milvus_index.filtered_search_params``). Without the share it finds almost none."""
    found_without = small_domain_searched(vector_store, sealed_and_loaded)
    if vector_store.is_lite:
        assert found_without < 0.5, "the graph index found the small domain unaided"


def test_a_filtered_search_on_milvus_lite_widens_ef_by_the_share_its_filter_keeps():
    from knowledge.milvus_index import filtered_search_params

    assert filtered_search_params("AUTOINDEX", {}, top_k=10, filter_share=0.01) == {"ef": 4000}
    assert filtered_search_params("HNSW", {"ef": 64}, top_k=10, filter_share=0.5) == {"ef": 80}
    assert filtered_search_params("HNSW", {"ef": 500}, top_k=10, filter_share=0.5) == {"ef": 500}
    assert filtered_search_params("HNSW", {"ef": 64}, top_k=10, filter_share=1e-9) == {"ef": 1_000_000}
    for share in (None, 0.0, 1.0):  # no filter, nothing kept, everything kept: as configured
        assert filtered_search_params("HNSW", {"ef": 64}, top_k=10, filter_share=share) == {"ef": 64}
    assert filtered_search_params("FLAT", {}, top_k=10, filter_share=0.01) == {}
