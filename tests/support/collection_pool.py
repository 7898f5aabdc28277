"""Emptied Milvus collections kept loaded between tests on a Milvus server (``vector_store``).

On Milvus 2.3.5 standalone, loading a new collection takes 2-3 s (creating it and its index a few
ms): with some 360 tests asking for a fresh collection, loading alone was most of the run. So on a
Milvus server (not milvus-lite, where a new collection costs little and the fixture keeps making
one per test) a test's collection is emptied at its end, checked empty with strong consistency,
and renamed into this pool; the next test whose ``ensure_collection`` would create a collection
of the same shape (dimension, model, index type, BM25 field) gets it renamed to its own name,
already loaded. Renaming keeps the collection loaded and costs a few milliseconds.

Only collections made by the product's own ``_ensure_collection`` in this process define a
shape; a collection whose description differs from that shape's at the end of a test (a test
that altered it, built an old schema by hand, or released it) is dropped as before.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable
from typing import Any

logger = logging.getLogger(__name__)

#: What ``_ensure_collection`` is asked for: (dim, model name, index type, BM25 in the collection).
Wanted = tuple[int, str, str, bool]


def _frozen(value: Any) -> Hashable:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return str(value)


def signature(store) -> Hashable | None:
    """The shape of ``store``'s collection as the server describes it (fields, functions,
    properties, indexes), or None when it is not loaded (it could not be handed on as it is)."""
    client = store.client()
    state = client.get_load_state(store.collection).get("state")
    if getattr(state, "name", str(state)) != "Loaded":
        return None
    description = client.describe_collection(store.collection)
    fields = [
        (f["name"], _frozen(f.get("type")), _frozen(f.get("params", {})), bool(f.get("is_primary")))
        for f in description.get("fields", [])
    ]
    functions = [_frozen(f) for f in description.get("functions", []) or []]
    indexes = []
    for index in sorted(client.list_indexes(store.collection)):
        info = client.describe_index(store.collection, index)
        indexes.append((index, str(info.get("index_type")), str(info.get("metric_type"))))
    return (
        tuple(fields),
        tuple(functions),
        _frozen(description.get("properties") or {}),
        tuple(indexes),
        str(description.get("consistency_level_name", "")),
    )


class CollectionPool:
    """Idle, empty, loaded collections of one Milvus server, by shape."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._shapes: dict[Wanted, Hashable] = {}
        self._idle: dict[Hashable, list[str]] = {}
        self.reused = 0
        self.created = 0

    def ensure_collection_wrapper(self, original: Callable, name: str) -> Callable:
        """``VectorStore._ensure_collection`` for the collection ``name`` of one test: a pooled
        collection of the wanted shape renamed to ``name`` instead of a new one when there is one."""
        pool = self

        def _ensure_collection(store, *, dim: int, model_name: str) -> None:
            if store.collection != name or store.uri != pool.uri or store.exists():
                return original(store, dim=dim, model_name=model_name)
            wanted: Wanted = (dim, model_name, store.index_type, store.bm25_in_collection())
            idle = pool._idle.get(pool._shapes.get(wanted), [])
            if idle:
                store._call("rename_collection", idle.pop(), name)
                store._loaded = True
                pool.reused += 1
                return None
            original(store, dim=dim, model_name=model_name)
            pool.created += 1
            pool._shapes.setdefault(wanted, signature(store))
            return None

        return _ensure_collection

    def release(self, store) -> None:
        """At a test's end: empty ``store``'s collection into the pool when it has a known shape,
        else drop it."""
        if not store.exists():
            return
        shape = signature(store)
        if shape is None or shape not in self._shapes.values():
            store.drop()
            return
        store.delete_chunks(sorted(store.chunk_ids()))
        if store.count() != 0:  # strong consistency: every write before it, the test's workers' too
            store.drop()
            return
        pooled = f"t_pool_{uuid.uuid4().hex[:12]}"
        store._call("rename_collection", store.collection, pooled)
        self._idle.setdefault(shape, []).append(pooled)

    def drop_all(self, store_for: Callable[[str], Any]) -> None:
        for names in self._idle.values():
            for name in names:
                store = store_for(name)
                try:
                    store.drop()
                finally:
                    store.reset()
        self._idle.clear()
        logger.info("collection pool: %d created, %d reused", self.created, self.reused)
