"""The parameters of the Milvus vector index and of a search in it, by index type.

``MILVUS_INDEX_TYPE`` alone was enough for AUTOINDEX and FLAT; an IVF index needs ``nlist`` (Milvus
2.3 refuses one without: "nlist out of range") and its search ``nprobe``, an HNSW index ``M`` and
``efConstruction`` and its search ``ef``. ``MILVUS_INDEX_PARAMS`` / ``MILVUS_SEARCH_PARAMS`` (JSON
objects) override the defaults here key by key.

The defaults: IVF with 1,024 lists (a million vectors: about 1,000 a list) searched 32 at a
time; HNSW with the graph Milvus's docs start from (M 16, efConstruction 200) searched with ef 64
(at least the number of hits asked for, which HNSW requires).

A search with a filter (an agent's domains, a call's documents) on milvus-lite's graph index
explores more of the graph, and on an IVF index (any store) scans more lists, the fewer rows the
filter keeps (``filtered_search_params``).
"""

from __future__ import annotations

import math
from typing import Any

_DEFAULT_INDEX: dict[str, dict[str, Any]] = {
    "IVF_FLAT": {"nlist": 1024},
    "IVF_SQ8": {"nlist": 1024},
    "IVF_PQ": {"nlist": 1024, "m": 16},
    "HNSW": {"M": 16, "efConstruction": 200},
}
_DEFAULT_SEARCH: dict[str, dict[str, Any]] = {
    "IVF_FLAT": {"nprobe": 32},
    "IVF_SQ8": {"nprobe": 32},
    "IVF_PQ": {"nprobe": 32},
    "HNSW": {"ef": 64},
}


def index_params(index_type: str, configured: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**_DEFAULT_INDEX.get(index_type.upper(), {}), **(configured or {})}


def search_params(index_type: str, configured: dict[str, Any] | None, *, top_k: int) -> dict[str, Any]:
    params = {**_DEFAULT_SEARCH.get(index_type.upper(), {}), **(configured or {})}
    if "ef" in params:
        params["ef"] = max(int(params["ef"]), top_k)
    return params


#: milvus-lite searches its graph index with this ``ef`` when a search names none
LITE_DEFAULT_EF = 64
#: a filtered search on milvus-lite's graph index explores enough of the graph to meet about this
#: many times the hits asked for among the rows the filter keeps
FILTERED_EF_FACTOR = 4
_EF_MAX = 1_000_000
#: milvus-lite builds HNSW (faiss) for these
_LITE_GRAPH_INDEXES = ("AUTOINDEX", "HNSW")
#: inverted-file indexes: a search scans the ``nprobe`` lists nearest the query, milvus-lite's and a
#: Milvus server's alike
_IVF_INDEXES = ("IVF_FLAT", "IVF_SQ8", "IVF_PQ")


def filter_widens(index_type: str, *, lite: bool) -> bool:
    """Whether a filtered search of this index reaches further when told the filter's share
    (``filtered_search_params``): an IVF index on any store, a graph index on milvus-lite. A Milvus
    server's graph index (knowhere) found every row of a small scope without help."""
    kind = index_type.upper()
    return kind in _IVF_INDEXES or (lite and kind in _LITE_GRAPH_INDEXES)


def filtered_search_params(
    index_type: str,
    params: dict[str, Any],
    *,
    top_k: int,
    filter_share: float | None,
    lite: bool = True,
    index: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The search parameters for a search whose filter keeps ``filter_share`` of the rows (None:
    no filter, or the share is not known); ``lite``: the store is milvus-lite; ``index``: the
    index's build parameters (an IVF index's ``nlist``).

    milvus-lite's HNSW (faiss) applies a filter while it walks the graph: the walk keeps its ``ef``
    best nodes, filtered out or not, so it meets about ``ef x share`` rows the filter keeps. With
    the default ef of 64 a domain holding 1% of 20,000 rows got 0.43 of its true ten nearest, one
    holding 0.1% got 0.05 (random clustered 512-d vectors, after the index was built; the search
    of every row found 0.997). So ef grows to ``FILTERED_EF_FACTOR x top_k / share``: 0.98 and
    1.00 there, at 24 and 99 ms a search against 16 ms (the unfiltered search took 62 ms). Milvus
    2.3.5 found every row of both domains once their segments were sealed and indexed, with no
    ef; its unsealed segments are another matter (docs/operations.md, "Agents scoped to small
    domains").

    An IVF index scans the ``nprobe`` lists nearest the query and keeps the rows of those lists
    the filter keeps, on milvus-lite and on Milvus 2.3.5 alike: with 128 lists and nprobe 32, a
    domain holding 0.1% of 20,000 rows got 0.54 of its true ten nearest and one holding 1% 0.94.
    So nprobe grows to ``nprobe / share`` (at most every list): as many of the scope's rows
    scanned as an unfiltered search scans of all rows. Every list gave 1.00 for both, and a
    search that scanned them took no longer than nprobe 32 (the filter skips the rest)."""
    if filter_share is None or not 0 < filter_share < 1:
        return params
    kind = index_type.upper()
    if kind in _IVF_INDEXES:
        nprobe = int(params.get("nprobe", _DEFAULT_SEARCH[kind]["nprobe"]))
        nlist = int(index_params(kind, index).get("nlist", nprobe))
        return {**params, "nprobe": max(nprobe, min(nlist, math.ceil(nprobe / filter_share)))}
    if not lite or kind not in _LITE_GRAPH_INDEXES:
        return params
    needed = math.ceil(FILTERED_EF_FACTOR * max(top_k, 1) / filter_share)
    return {**params, "ef": min(_EF_MAX, max(int(params.get("ef", LITE_DEFAULT_EF)), needed))}
