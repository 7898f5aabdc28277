"""L1: embed the query, search for the best chunks (behind ``retrieval.lookup.search``), keep raw
dense distances.

``RETRIEVAL_L1_MODE=hybrid`` (the default): the dense search in Milvus and BM25 on the chunk text in
the lexical engine in force (tantivy beside Milvus on the embedded default, Milvus's own BM25 on a
Milvus >= 2.5 server: ``knowledge.lexical``), fused here by ``RETRIEVAL_HYBRID_RANKER``
(``retrieval.lookup.fusion``); hits come in fused order and each carries its raw squared L2
distance (what FS-1 normalises) and its text (for lexical evidence).
``dense``: the vector alone, nearest first, as before hybrid search.

Two small per-process caches, because agents repeat themselves (segmented LRUs: a flood of one-off
queries from one agent cannot evict what the others ask again, ``retrieval.lookup.caches``):
- query vectors, keyed by (embedding model, query text): a repeated query is not embedded again;
- search hits, keyed by (Milvus URI and collection, model, L1 mode, lexical engine and fusion, query, top_k,
  domain, the documents a metadata condition let through, corpus signature): a filtered call never
  reads an unfiltered call's hits, nor the reverse, nor another condition's; a
  repeated query is not searched again while the corpus is unchanged. The corpus signature
  (``retrieval.lookup.corpus``) moves on every upload, re-index and delete, so a cached result never
  outlives the documents it was computed on by more than ``RETRIEVAL_INDEX_REFRESH_MS``.
Both hold ``RETRIEVAL_QUERY_CACHE_SIZE`` entries (0 turns them off).

No BLAS thread limit is set around the search: at 100,000 chunks on 2 cores, embedded milvus-lite
3.x searched as fast with numpy's default BLAS threads as with one, once its segments had settled
(alternating A/B in one process; ``bench/lookup.py --blas-compare`` finds the same for a
milvus-lite server). The slow first minute after a flush is what looked like a thread effect.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from knowledge.embeddings import get_embedder
from knowledge.lexical import get_lexical_engine, query_tokens
from knowledge.vectorstore import VectorStore, VectorStoreError, get_vector_store
from retrieval.lookup.caches import LRUCache
from retrieval.lookup.query_terms import bm25_query_text
from retrieval.lookup.scope_share import filter_share, filter_share_cache_clear
from retrieval.lookup.search import ChunkHit, ChunkSearch, DenseSearch, FusedSearch, SearchQuery

_vectors = LRUCache()
_hits = LRUCache()
#: A metadata condition's documents are searched inside Milvus and the lexical engine (``doc_key
#: in [...]``) up to this many; beyond it the expression would be huge, so L1 fetches
#: ``CONDITION_FETCH_FACTOR`` times ``top_k`` within the domains and keeps the documents' hits.
DOC_KEYS_IN_SEARCH_MAX = 1000
CONDITION_FETCH_FACTOR = 4


@dataclass(frozen=True)
class L1Result:
    #: chunk hits, best first (fused order in hybrid mode), each with its raw squared L2 score
    hits: tuple[ChunkHit, ...]
    embedding_model: str
    embed_ms: float
    search_ms: float
    vector_cached: bool
    hits_cached: bool
    #: "hybrid:rrf", "hybrid:weighted" or "dense"
    mode: str = "dense"
    #: the lexical engine hybrid search read ("tantivy" or "milvus"); None in dense mode
    lexical_engine: str | None = None


def query_vector(query: str) -> tuple[np.ndarray, str, bool, float]:
    """(unit vector, model name, from cache?, milliseconds spent)."""
    started = time.perf_counter()
    embedder = get_embedder()
    key = (embedder.model_name, query)
    vector = _vectors.get(key)
    if vector is not None:
        return vector, embedder.model_name, True, (time.perf_counter() - started) * 1000
    vector = embedder.encode_query(query)
    vector.setflags(write=False)
    _vectors.put(key, vector, capacity=settings.RETRIEVAL_QUERY_CACHE_SIZE)
    return vector, embedder.model_name, False, (time.perf_counter() - started) * 1000


def l1_mode() -> str:
    """The L1 in force: "dense", or "hybrid:<ranker>"."""
    mode = settings.RETRIEVAL_L1_MODE
    return f"hybrid:{settings.RETRIEVAL_HYBRID_RANKER}" if mode == "hybrid" else "dense"


def chunk_search_for(store: VectorStore, mode: str) -> ChunkSearch:
    """The search behind L1 in ``mode`` (``l1_mode()``): hybrid fuses the dense search with the
    lexical engine in force (``knowledge.lexical``: decided once per process and logged)."""
    if mode == "dense":
        return DenseSearch(store)
    return FusedSearch(
        store,
        get_lexical_engine(),
        ranker=settings.RETRIEVAL_HYBRID_RANKER,
        rrf_k=settings.RETRIEVAL_RRF_K,
        dense_weight=settings.RETRIEVAL_DENSE_WEIGHT,
    )


def lexical_engine_in_force(mode: str) -> str | None:
    """The lexical engine hybrid L1 reads ("tantivy" or "milvus"); None in dense mode."""
    return None if mode == "dense" else get_lexical_engine().name


def l1_search(
    *,
    query: str,
    top_k: int,
    signature: Hashable,
    domain: str | frozenset[str] | None = None,
    doc_keys: frozenset[str] | None = None,
) -> L1Result:
    """The ``top_k`` best chunks for ``query``, of ``domain`` when given: one domain (Dify's
    dataset) or a set (a scoped agent's domains, filtered inside Milvus so a small scope among large
    domains still gets ``top_k`` candidates); of ``doc_keys`` only when given (the documents a
    call's metadata condition lets through; empty: nothing is searched). Raises EmbeddingError /
    VectorStoreError."""
    embedder = get_embedder()
    store = get_vector_store()
    mode = l1_mode()
    engine = lexical_engine_in_force(mode)
    fusion = (settings.RETRIEVAL_RRF_K, settings.RETRIEVAL_DENSE_WEIGHT) if mode != "dense" else ()
    cache_key = (
        store.uri,
        store.collection,
        embedder.model_name,
        mode,
        engine,
        fusion,
        query,
        top_k,
        domain,
        doc_keys,
        signature,
    )
    cached = _hits.get(cache_key)
    if cached is not None:
        return L1Result(cached, embedder.model_name, 0.0, 0.0, True, True, mode, engine)
    embedded: dict = {}

    def embed() -> list[float]:
        """The query's vector, embedded once, on the search's first ask (timed apart)."""
        if "vector" not in embedded:
            vector, model_name, cached, ms = query_vector(query)
            embedded.update(vector=vector.tolist(), model=model_name, cached=cached, ms=ms)
        return embedded["vector"]

    started = time.perf_counter()
    # The query's key terms (question words out), cut by the analyser the index was cut with.
    tokens = query_tokens(bm25_query_text(query)) if mode != "dense" else ()
    hits = _hits_search(
        chunk_search_for(store, mode),
        SearchQuery(query, embed, tokens),
        store,
        top_k,
        domain,
        doc_keys,
        signature,
    )
    embed()  # every L1 reports its model, whatever the search asked
    search_ms = (time.perf_counter() - started) * 1000 - embedded["ms"]
    _hits.put(cache_key, hits, capacity=settings.RETRIEVAL_QUERY_CACHE_SIZE)
    return L1Result(
        hits, embedded["model"], embedded["ms"], search_ms, embedded["cached"], False, mode, engine
    )


def _hits_search(
    search: ChunkSearch,
    query: SearchQuery,
    store: VectorStore,
    top_k: int,
    domain: str | frozenset[str] | None,
    doc_keys: frozenset[str] | None,
    signature: Hashable,
) -> tuple[ChunkHit, ...]:
    """The search itself, within a call's documents (``doc_keys``) when it names them. A search
    with a filter says what share of the chunks it keeps (``scope_share``), so milvus-lite's graph
    index walks, and an IVF index scans, far enough to meet them."""
    # Too many documents for the search's own filter: kept here, from a larger fetch.
    kept_here = doc_keys if doc_keys is not None and len(doc_keys) > DOC_KEYS_IN_SEARCH_MAX else None
    try:
        if doc_keys is not None and not doc_keys:
            return ()  # no document passes the condition: nothing to search
        # The documents the search itself filters on (the rest are kept here, from a larger fetch).
        searched = doc_keys if kept_here is None else None
        # Only a filtered search of an IVF index or milvus-lite's graph index needs the share (a
        # server's graph index finds a small scope's rows by itself).
        filtered = domain is not None or searched is not None
        share = (
            filter_share(signature=signature, domains=domain, doc_keys=searched)
            if filtered and store.filter_share_matters
            else None
        )
        if kept_here is None:
            return search.search(query, top_k=top_k, domains=domain, doc_keys=doc_keys, filter_share=share)
        fetched = search.search(
            query, top_k=top_k * CONDITION_FETCH_FACTOR, domains=domain, filter_share=share
        )
        return tuple(h for h in fetched if h.doc_key in kept_here)[:top_k]
    except VectorStoreError:
        # No collection yet means nothing was ever indexed: an empty result, not an outage.
        if not store.exists():
            return ()
        raise


def l1_caches_clear() -> None:
    _vectors.clear()
    _hits.clear()
    filter_share_cache_clear()
