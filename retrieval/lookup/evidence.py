"""Stage "evidence": each searchable document becomes a candidate with its L1 level: its closest
chunk's similarity (FS-1) moved by lexical evidence (the share of the query's key terms its text
holds, ``retrieval.lookup.lexical``), ranked with L0 (``retrieval.lookup.ranking``)."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.lookup.keyword_index import text_normalise
from retrieval.lookup.lexical import main_script
from retrieval.lookup.query_terms import Term, query_terms
from retrieval.lookup.ranking import Candidate, candidates_collect
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.searchable import Searchable


@dataclass(frozen=True)
class CandidateEvidence:
    #: every candidate document, L0 and L1 merged, best first
    candidates: list[Candidate]
    #: the query's weighted terms the lexical evidence compared (none without chunk text)
    terms: tuple[Term, ...]

    def by_doc(self) -> dict[str, Candidate]:
        return {c.doc_key: c for c in self.candidates}


def evidence_weigh(request: LookupRequest, searchable: Searchable) -> CandidateEvidence:
    query = request.query
    # Cutting the query costs jieba's dictionary: only when some hit carries text to compare.
    terms = query_terms(query) if any(h.text for h in searchable.hits) else ()
    candidates = candidates_collect(
        l0=searchable.l0,
        hits=searchable.hits,
        thresholds=request.thresholds,
        l0_match_count=searchable.l0_match_count,
        terms=terms,
        query_script=main_script(text_normalise(query)),
    )
    for candidate in candidates:
        document = searchable.documents[candidate.doc_key]
        candidate.domain, candidate.title = document.domain, document.title
    return CandidateEvidence(candidates, terms)
