"""Stage "searchable documents": of what L0 and L1 found, only documents with an indexed version,
within the agent's domains and passing the call's metadata condition (``filtering``), count. The database is the truth: Milvus may briefly hold vectors of
a deleted document, and a document being re-indexed still answers at its previous version."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models.functions import Length

from knowledge.selectors import documents_searchable
from retrieval.agents.scopes import domain_allowed
from retrieval.lookup.candidates import ChunkCandidates, KeywordCandidates
from retrieval.lookup.filtering import DocumentFilter
from retrieval.lookup.keyword_index import L0Match
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.results import DocumentRow
from retrieval.lookup.search import ChunkHit

# L0 documents looked at in detail: a two-character query can match thousands of titles; they
# all count in l0_match_count, the best-ranked this many become candidates.
L0_CANDIDATES = 50


@dataclass(frozen=True)
class Searchable:
    #: doc_key -> the searchable document's row
    documents: dict[str, DocumentRow]
    #: L0 matches of searchable documents (at most L0_CANDIDATES of them)
    l0: list[L0Match]
    #: the seeds' matchCount: every searchable match, those beyond L0_CANDIDATES included
    l0_match_count: int
    #: L1 hits of searchable documents, best first
    hits: list[ChunkHit]


def searchable_select(
    request: LookupRequest, keyword: KeywordCandidates, chunks: ChunkCandidates, filtered: DocumentFilter
) -> Searchable:
    # The condition first: a match it excludes must not take one of the L0_CANDIDATES places.
    matches = [m for m in keyword.matches if filtered.allows(m.doc_key)]
    considered = matches[:L0_CANDIDATES]
    wanted = {m.doc_key for m in considered} | {h.doc_key for h in chunks.hits}
    # Searchable = has an indexed version; SQLite finds these by the doc_key index (the status
    # index made it walk every indexed document).
    rows = (
        documents_searchable()
        .filter(doc_key__in=wanted)
        .annotate(content_len=Length("content"))
        .order_by()
        .values("id", "doc_key", "title", "domain", "content_len", "status")
    )
    documents = {
        row["doc_key"]: DocumentRow(
            id=row["id"],
            doc_key=row["doc_key"],
            title=row["title"],
            domain=row["domain"],
            content_len=row["content_len"],
        )
        for row in rows
        if domain_allowed(row["domain"], request.domains) and filtered.allows(row["doc_key"])
    }
    l0 = [m for m in considered if m.doc_key in documents]
    return Searchable(
        documents=documents,
        l0=l0,
        l0_match_count=len(l0) + max(0, len(matches) - L0_CANDIDATES),
        hits=[h for h in chunks.hits if h.doc_key in documents],
    )
