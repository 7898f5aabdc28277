"""A domain holding 0.1% of a collection's rows, searched with and without the share its filter
keeps: what a filtered search of a graph or an IVF index must still find
(``knowledge.milvus_index.filtered_search_params``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from knowledge.vectorstore import ChunkVector, VectorStore

ROWS = 6000
SMALL_ROWS = 6
TOP_K = 3


def sealed_and_loaded(store: VectorStore) -> None:
    """Flush the collection and load it again: milvus-lite builds its index over every segment when
    it loads (what its background build does some seconds after a write)."""
    store._call("flush", store.collection)
    store._call("release_collection", store.collection)
    store._call("load_collection", store.collection)


def indexed_and_loaded(store: VectorStore, timeout: float = 120.0) -> None:
    """Every row searched through the built index: flushed, on a server waited for until its index
    covers every row, then loaded again (milvus-lite builds its index when it loads; a server's
    query node may go on searching a sealed segment exactly until it loads that segment's index)."""
    store._call("flush", store.collection)
    deadline = time.monotonic() + timeout
    rows = store.count()
    while not store.is_lite:
        described = store._call("describe_index", store.collection, "vector") or {}
        if int(described.get("indexed_rows", 0)) >= rows and not int(described.get("pending_index_rows", 0)):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"the index did not cover {rows} rows within {timeout:.0f} s: {described}")
        time.sleep(0.5)
    store._call("release_collection", store.collection)
    store._call("load_collection", store.collection)


def small_domain_searched(store: VectorStore, ready: Callable[[VectorStore], None]) -> float:
    """Write ``ROWS`` clustered rows, ``SMALL_ROWS`` of them in domain "small", make them ready to
    search (``ready``), then for 15 queries check that the search told the filter's share returns
    exactly the domain's nearest rows. Returns the share of those rows the same searches found
    without the share."""
    rng = np.random.default_rng(5)
    dim = 16
    centers = rng.normal(size=(20, dim))
    vectors = centers[rng.integers(0, 20, ROWS)] + 0.7 * rng.normal(size=(ROWS, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    small = sorted(rng.choice(ROWS, SMALL_ROWS, replace=False).tolist())
    store.ensure_collection(dim=dim, model_name="test")
    store.upsert(
        [
            ChunkVector(
                chunk_id=f"d{i}.md#0",
                vector=vectors[i].tolist(),
                domain="small" if i in small else "big",
                doc_key=f"d{i}.md",
                chunk_index=0,
            )
            for i in range(ROWS)
        ]
    )
    ready(store)
    queries = rng.normal(size=(15, dim))
    found_without = []
    for q in queries / np.linalg.norm(queries, axis=1, keepdims=True):
        nearest = np.argsort(((vectors[small] - q) ** 2).sum(axis=1))[:TOP_K]
        expected = {f"d{small[i]}.md#0" for i in nearest}
        hits = store.search(q.tolist(), top_k=TOP_K, domain="small", filter_share=SMALL_ROWS / ROWS)
        assert {h.chunk_id for h in hits} == expected
        without = store.search(q.tolist(), top_k=TOP_K, domain="small")
        found_without.append(len(expected & {h.chunk_id for h in without}) / TOP_K)
    return float(np.mean(found_without))
