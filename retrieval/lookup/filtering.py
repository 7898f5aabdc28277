"""Stage "filtering": the documents a call's ``metadata_condition`` lets through, before any search.

The condition is Dify's language (``retrieval.lookup.metadata_conditions``, the one parser and
evaluator the Dify endpoint uses too), evaluated on each searchable document of the call's domains
as Dify's endpoint evaluates it (the same row: id, doc_key, title, domain, metadata, created_at,
updated_at). L0's matches and L1's search then see only these documents (``searchable``,
``candidates``): a document failing the condition is no candidate at all, so it cannot be the
answer, be withheld as already sent, or count for completeness. No condition: no filter (None),
and no query here.
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.selectors import documents_searchable
from retrieval.lookup.request import LookupRequest

#: The document row a condition reads, as ``retrieval.entrypoints.dify`` reads it.
CONDITION_FIELDS = ("id", "doc_key", "title", "domain", "metadata", "created_at", "updated_at")


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
    rows = documents_searchable().order_by()
    if request.domains is not None:
        rows = rows.filter(domain__in=request.domains)
    return DocumentFilter(
        frozenset(
            row["doc_key"] for row in rows.values(*CONDITION_FIELDS).iterator() if condition.passes(row)
        )
    )
