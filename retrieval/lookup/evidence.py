"""Stage "evidence": each searchable document becomes a candidate with its L1 level: its closest
chunk's similarity (FS-1) moved by lexical evidence (the share of the query's key terms its text
holds, ``retrieval.lookup.lexical``), ranked with L0 (``retrieval.lookup.ranking``)."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.lookup.keyword_index import L0Match, text_normalise
from retrieval.lookup.level_features import IDENTIFIERS_ABSENT, CandidateSignals, features_compute
from retrieval.lookup.level_model import FOUND_AT, LevelModel
from retrieval.lookup.lexical import main_script
from retrieval.lookup.normalisation import LEXICAL_WEAK
from retrieval.lookup.query_terms import Term, query_terms
from retrieval.lookup.ranking import Candidate, candidates_collect
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.searchable import Searchable
from retrieval.lookup.specificity import term_specific


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
    model = request.level_model
    candidates = candidates_collect(
        l0=searchable.l0,
        hits=searchable.hits,
        thresholds=request.thresholds,
        l0_match_count=searchable.l0_match_count,
        terms=terms,
        query_script=main_script(text_normalise(query)),
        precise_if=None if model is None else _specific_match,
    )
    for candidate in candidates:
        document = searchable.documents[candidate.doc_key]
        candidate.domain, candidate.title = document.domain, document.title
    if model is not None:
        estimates_attach(model, query, candidates, searchable)
    return CandidateEvidence(candidates, terms)


#: the estimate of a candidate holding less than LEXICAL_WEAK of the query's key terms stays below
#: REFERENCE's band
KEY_TERMS_ABSENT_CAP = FOUND_AT - 0.01


def _specific_match(match: L0Match) -> bool:
    return any(term_specific(t, match.doc_key) for t in match.terms)


def estimates_attach(
    model: LevelModel, query: str, candidates: list[Candidate], searchable: Searchable
) -> None:
    """Each candidate's level evidence and the model's calibrated estimate of it."""
    texts: dict[str, list[str]] = {}
    for hit in searchable.hits:
        if hit.text:
            texts.setdefault(hit.doc_key, []).append(hit.text)
    signals = [
        CandidateSignals(
            c.doc_key, c.similarity, c.bm25, c.coverage, "\n".join([c.title, *texts.get(c.doc_key, [])])
        )
        for c in candidates
    ]
    features = features_compute(query, signals)
    for candidate in candidates:
        if not model_applies(candidate):
            continue
        candidate.features = features[candidate.doc_key]
        candidate.estimate = model.estimate(candidate.features)
        candidate.estimate = estimate_capped(candidate.estimate, candidate.features)


def estimate_capped(estimate: float, features: dict[str, float]) -> float:
    """The estimate, held below REFERENCE's band when the text lacks most of the query's key
    terms or one of its identifiers: whatever the margins say (one BM25 hit among three
    documents is a margin of 1), it is not an answer. ``retrieval.staff.level_fit`` replays it."""
    if features.get("coverage", 1.0) < LEXICAL_WEAK or features.get(IDENTIFIERS_ABSENT, 0.0) > 0:
        return min(estimate, KEY_TERMS_ABSENT_CAP)
    return estimate


def model_applies(candidate: Candidate) -> bool:
    """The model was fitted on query and text in one script (CMRC2018, DRCD); across scripts (an
    English question on a Chinese runbook) or without text its evidence means something else, so
    the candidate keeps the seeds' rule (similarity moved by lexical evidence, L0)."""
    return candidate.coverage is not None and candidate.coverage_same_script
