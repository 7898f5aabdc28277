"""Stage "filtering": the documents a call's ``metadata_condition`` lets through, before any search.

The condition is Dify's language (``retrieval.lookup.metadata_conditions``, the one parser and
evaluator the Dify endpoint uses too), evaluated on each searchable document of the call's domains
as Dify's endpoint evaluates it (the same row: id, doc_key, title, domain, metadata, created_at,
updated_at). L0's matches and L1's search then see only these documents (``searchable``,
``candidates``): a document failing the condition is no candidate at all, so it cannot be the
answer, be withheld as already sent, or count for completeness. No condition: no filter (None),
and no query here.

Reading and evaluating every document's metadata costs about 200 ms at 10,000 documents on
SQLite, so the passing set is kept per (condition, domains, corpus signature): the signature
moves on every upload, delete, re-index and metadata edit (``retrieval.lookup.corpus``), the same
rule the L0 index and the L1 cache follow. At most ``FILTER_CACHE_SIZE`` sets are kept (each
holds up to every doc key).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from knowledge.selectors import documents_searchable
from retrieval.lookup.caches import LRUCache
from retrieval.lookup.corpus import corpus_signature
from retrieval.lookup.request import LookupRequest

#: The document row a condition reads, as ``retrieval.entrypoints.dify`` reads it.
CONDITION_FIELDS = ("id", "doc_key", "title", "domain", "metadata", "created_at", "updated_at")
FILTER_CACHE_SIZE = 64
_passing = LRUCache()


@dataclass(frozen=True)
class DocumentFilter:
    #: doc keys passing the call's metadata condition; None: the call has no condition
    doc_keys: frozenset[str] | None = None

    def allows(self, doc_key: str) -> bool:
        return self.doc_keys is None or doc_key in self.doc_keys


def documents_filter(request: LookupRequest) -> DocumentFilter:
    condition = request.metadata_condition
    if condition is None or not condition.conditions:
        return DocumentFilter()
    key = (condition, request.domains, corpus_signature())
    cached = _passing.get(key)
    if cached is not None:
        return DocumentFilter(cached)
    rows = documents_searchable().order_by()
    if request.domains is not None:
        rows = rows.filter(domain__in=request.domains)
    passing = frozenset(
        row["doc_key"] for row in rows.values(*CONDITION_FIELDS).iterator() if condition.passes(row)
    )
    _passing.put(key, passing, capacity=min(FILTER_CACHE_SIZE, settings.RETRIEVAL_QUERY_CACHE_SIZE))
    return DocumentFilter(passing)


def document_filters_clear() -> None:
    _passing.clear()
