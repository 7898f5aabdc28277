"""The share of the searchable chunks a search's filter keeps: an agent's domains, a call's
documents. milvus-lite's graph index and an IVF index (on any store) need it to search with a
filter (``knowledge.milvus_index.filtered_search_params``): the fewer rows the filter keeps, the
more of the graph the search must walk, or the more of its lists it must scan, to meet them.

The chunk count of each domain is read again when the corpus signature has moved (documents
indexed or deleted), at most every ``REREAD_SECONDS``: one grouped count over the chunk rows, which
a bulk ingest would otherwise repeat at every batch. A call's documents are counted per call (a
handful of keys, an indexed lookup). The share is a hint, not a promise: the collection may also
hold a document's next version while it is being indexed, and a domain indexed since the last
reading counts as empty until the next (its search then walks as far as an unfiltered one).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable

from knowledge.selectors import chunk_count_of, chunk_counts_by_domain

REREAD_SECONDS = 30.0

_lock = threading.Lock()
#: (signature, when read, chunks per domain)
_counts: tuple[Hashable, float, dict[str, int]] | None = None


def _domain_counts(signature: Hashable) -> dict[str, int]:
    global _counts
    held = _counts
    now = time.monotonic()
    if held is not None and (held[0] == signature or now - held[1] < REREAD_SECONDS):
        return held[2]
    counts = chunk_counts_by_domain()
    with _lock:
        _counts = (signature, now, counts)
    return counts


def filter_share(
    *, signature: Hashable, domains: str | frozenset[str] | None, doc_keys: frozenset[str] | None
) -> float | None:
    """The share of the searchable chunks in ``domains`` (one, a set, or None: all) and, when
    given, in ``doc_keys``; None when nothing is filtered or nothing is indexed."""
    if domains is None and doc_keys is None:
        return None
    counts = _domain_counts(signature)
    total = sum(counts.values())
    if total == 0:
        return None
    names = frozenset([domains]) if isinstance(domains, str) else domains
    if doc_keys is not None:
        kept = chunk_count_of(doc_keys, names) if doc_keys else 0
    else:
        kept = sum(counts.get(name, 0) for name in names or ())
    return min(1.0, kept / total)


def filter_share_cache_clear() -> None:
    global _counts
    with _lock:
        _counts = None
