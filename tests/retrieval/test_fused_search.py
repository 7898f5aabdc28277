"""Hybrid L1 fused in one place (retrieval.lookup.fusion, retrieval.lookup.search.FusedSearch):
the same order Milvus's own hybrid search gives on the same two rankings, whatever engine ran
BM25; a chunk only BM25 found carries its true L2 distance; domain filters hold on both sides."""

from __future__ import annotations

import math

import numpy as np
import pytest

from knowledge.lexical import get_lexical_engine, query_tokens
from knowledge.services.lexical import lexical_chunk
from knowledge.vectorstore import ChunkVector
from retrieval.lookup.fusion import Ranked, rankings_fuse
from retrieval.lookup.search import FusedSearch, SearchQuery


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()


# --- the fusion, pure -------------------------------------------------------------------------------
def test_rrf_sums_one_over_k_plus_rank_plus_one_and_keeps_the_dense_order_on_ties():
    dense = [Ranked("a", 0.1), Ranked("b", 0.2), Ranked("c", 0.3)]
    lexical = [Ranked("c", 9.0), Ranked("d", 5.0)]
    # a: 1/61; b: 1/62; c: 1/63 + 1/61; d: 1/62 (ties with b: b came first, from the dense side)
    assert rankings_fuse(dense, lexical, ranker="rrf", top_k=10, rrf_k=60) == ["c", "a", "b", "d"]
    assert rankings_fuse(dense, lexical, ranker="rrf", top_k=2, rrf_k=60) == ["c", "a"]


def test_rrf_weighs_each_ranking_by_the_dense_weight_and_half_is_milvus_s_rrf():
    dense = [Ranked("a", 0.1), Ranked("b", 0.2)]
    lexical = [Ranked("b", 9.0), Ranked("a", 5.0), Ranked("c", 1.0)]
    # equal: a = 1/61 + 1/62 = b; the tie keeps the dense order
    assert rankings_fuse(dense, lexical, ranker="rrf", top_k=3, rrf_k=60, dense_weight=0.5)[:2] == ["a", "b"]
    # BM25 weighed more: b (first in BM25) leads, and c (BM25 alone) passes nothing dense-only
    assert rankings_fuse(dense, lexical, ranker="rrf", top_k=3, rrf_k=60, dense_weight=0.3) == ["b", "a", "c"]
    # the dense side alone decides at 1, BM25's alone at 0
    assert rankings_fuse(dense, lexical, ranker="rrf", top_k=2, rrf_k=60, dense_weight=1.0) == ["a", "b"]
    assert rankings_fuse(dense, lexical, ranker="rrf", top_k=3, rrf_k=60, dense_weight=0.0) == ["b", "a", "c"]


def test_a_dense_weight_outside_0_to_1_stops_the_start_naming_the_setting():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={
            **__import__("os").environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "RETRIEVAL_DENSE_WEIGHT": "1.5",
        },
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "RETRIEVAL_DENSE_WEIGHT must be between 0 and 1; got 1.5" in done.stderr


def test_weighted_normalises_a_distance_and_a_bm25_score_as_milvus_does():
    dense = [Ranked("near", 0.0), Ranked("far", 3.0)]
    lexical = [Ranked("far", 100.0)]
    fused = rankings_fuse(dense, lexical, ranker="weighted", top_k=2, dense_weight=0.5)
    # near: 0.5 * (1 - 0) = 0.5; far: 0.5 * (1 - 2 atan(3) / pi) + 0.5 * 2 atan(100) / pi ~ 0.60
    assert fused == ["far", "near"]
    far = 0.5 * (1 - 2 * math.atan(3.0) / math.pi) + 0.5 * 2 * math.atan(100.0) / math.pi
    assert far == pytest.approx(0.5992, abs=1e-4)


def test_an_unknown_ranker_is_named():
    with pytest.raises(ValueError, match="ranker must be one of rrf, weighted; got 'max'"):
        rankings_fuse([], [], ranker="max", top_k=1)


# --- the search, on a real collection and a real lexical index --------------------------------------
ROWS = [
    ("near.md", _unit([1, 0.1, 0, 0]), "缓存过期策略", "infra"),
    ("words.md", _unit([0, 0, 1, 0]), "数据库连接池 maximumPoolSize 的配置", "infra"),
    ("other.md", _unit([0, 1, 0, 0]), "退款流程 连接池", "payments"),
    ("far.md", _unit([0, 0, 0, 1]), "日志轮转", "infra"),
]


def _corpus(store):
    store.ensure_collection(dim=4, model_name="test")
    store.upsert([ChunkVector(f"{k}#0", v, d, k, 0, text=t) for k, v, t, d in ROWS])
    engine = get_lexical_engine()
    engine.documents_replace(
        {k: [lexical_chunk(doc_key=k, domain=d, chunk_index=0, text=t)] for k, _, t, d in ROWS}
    )
    return engine


def _fused(store, engine, ranker="rrf"):
    return FusedSearch(store, engine, ranker=ranker, rrf_k=60, dense_weight=0.5)


def test_a_chunk_only_bm25_found_carries_its_true_l2_distance_and_its_text(vector_store):
    engine = _corpus(vector_store)
    vector = _unit([1, 0, 0, 0])
    query = SearchQuery("连接池 maximumPoolSize", lambda: vector, query_tokens("连接池 maximumPoolSize"))
    dense_only = {h.doc_key for h in vector_store.search(vector, top_k=1)}
    hits = _fused(vector_store, engine).search(query, top_k=1 + 1, domains=None)
    # top_k 2: near.md (dense) and words.md (BM25) both; words.md is far from the vector
    assert dense_only == {"near.md"} and {h.doc_key for h in hits} == {"near.md", "words.md"}
    words = next(h for h in hits if h.doc_key == "words.md")
    expected = float(((np.asarray(ROWS[1][1]) - np.asarray(vector)) ** 2).sum())
    assert words.l2_distance == pytest.approx(expected, abs=1e-5)
    assert words.text == "数据库连接池 maximumPoolSize 的配置"
    assert all(h.text for h in hits)  # dense hits carry their text too, for lexical evidence


@pytest.mark.parametrize("ranker", ["rrf", "weighted"])
def test_a_domain_filter_holds_on_the_lexical_side_too(vector_store, ranker):
    engine = _corpus(vector_store)
    query = SearchQuery("连接池 退款", lambda: _unit([1, 0, 0, 0]), query_tokens("连接池 退款"))
    hits = _fused(vector_store, engine, ranker).search(query, top_k=5, domains=frozenset({"payments"}))
    assert [h.doc_key for h in hits] == ["other.md"]
    assert _fused(vector_store, engine, ranker).search(query, top_k=5, domains=frozenset()) == ()


def test_a_query_with_no_word_for_bm25_is_searched_dense_alone(vector_store):
    engine = _corpus(vector_store)
    vector = _unit([0, 0, 0, 1])
    hits = _fused(vector_store, engine).search(SearchQuery("什么", lambda: vector, ()), top_k=2, domains=None)
    assert [h.doc_key for h in hits] == [h.doc_key for h in vector_store.search(vector, top_k=2)]


@pytest.mark.parametrize("ranker", ["rrf", "weighted"])
def test_fused_here_on_milvus_s_bm25_it_ranks_as_milvus_s_own_hybrid_search(
    vector_store, milvus_bm25, ranker
):
    """With Milvus's own BM25 as the lexical engine, fusing here gives the order Milvus's
    hybrid_search gives: the fusion moved, not the ranking. Skipped on a Milvus without BM25."""
    from knowledge.lexical import reset_lexical_engine

    reset_lexical_engine()
    engine = _corpus(vector_store)
    assert engine.name == "milvus"
    for words, vector in [("连接池 maximumPoolSize", [1, 0, 0, 0]), ("退款 连接池 日志", [0, 0.2, 0, 1])]:
        vector = _unit(vector)
        ours = _fused(vector_store, engine, ranker).search(
            SearchQuery(words, lambda vector=vector: vector, query_tokens(words)), top_k=4, domains=None
        )
        milvus = vector_store.hybrid_search(vector, " ".join(query_tokens(words)), top_k=4, ranker=ranker)
        assert [h.chunk_id for h in ours] == [h.chunk_id for h in milvus]
        assert [h.l2_distance for h in ours] == pytest.approx([h.l2_distance for h in milvus], abs=1e-5)
