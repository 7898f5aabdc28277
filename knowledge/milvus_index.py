"""The parameters of the Milvus vector index and of a search in it, by index type.

``MILVUS_INDEX_TYPE`` alone was enough for AUTOINDEX and FLAT; an IVF index needs ``nlist`` (Milvus
2.3 refuses one without: "nlist out of range") and its search ``nprobe``, an HNSW index ``M`` and
``efConstruction`` and its search ``ef``. ``MILVUS_INDEX_PARAMS`` / ``MILVUS_SEARCH_PARAMS`` (JSON
objects) override the defaults here key by key.

The defaults: IVF with 1,024 lists (a million vectors: about 1,000 a list) searched 32 at a
time; HNSW with the graph Milvus's docs start from (M 16, efConstruction 200) searched with ef 64
(at least the number of hits asked for, which HNSW requires).
"""

from __future__ import annotations

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
