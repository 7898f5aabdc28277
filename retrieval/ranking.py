"""From L0 matches and L1 hits to ranked candidate documents, what the session withholds, and
the relevance level of what is returned (FS-2, FS-3, seed 000 Phase 2). Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from knowledge.vectorstore import VectorHit
from retrieval.keyword_index import L0Match
from retrieval.normalisation import RelevanceLevel, relevance_level_decide, similarity_from_l2
from retrieval.thresholds import Thresholds
from retrieval.tracker import SessionRetrievals

DOMAIN_DEDUP_MODES = ("off", "soft", "hard")


@dataclass
class Candidate:
    """One document that L0 or L1 (or both) found."""

    doc_key: str
    domain: str
    title: str
    l0_terms: list[str] = field(default_factory=list)
    #: the document's best L1 chunk: raw squared L2 score, its similarity and chunk index
    score: float | None = None
    similarity: float | None = None
    chunk_index: int | None = None
    #: the one and only L0 match (L0 matchCount == 1)
    precise: bool = False

    @property
    def via_l0(self) -> bool:
        return bool(self.l0_terms)

    def passes(self, thresholds: Thresholds) -> bool:
        """Returnable: an L0 match, or an L1 hit at or above the REFERENCE threshold. L1 hits
        under it are never returned (FS-2)."""
        return self.via_l0 or (self.similarity is not None and self.similarity >= thresholds.reference)


def candidates_collect(
    *, l0: list[L0Match], hits: list[VectorHit], thresholds: Thresholds, l0_match_count: int
) -> list[Candidate]:
    """Every candidate document, L0 and L1 merged (best chunk per document), ranked:

    1. the PRECISE document (L0 matchCount == 1);
    2. documents whose best similarity passes the REFERENCE threshold, most similar first;
    3. the other L0 documents, those with a (low) similarity first, then longest matched term.
    L1-only documents under the threshold come last; they are recorded, never returned.
    """
    by_key: dict[str, Candidate] = {}
    for match in l0:
        by_key[match.doc_key] = Candidate(
            match.doc_key, match.domain, match.title, l0_terms=list(match.terms)
        )
    for hit in hits:  # closest first: the first hit of a document is its best chunk
        candidate = by_key.get(hit.doc_key)
        if candidate is None:
            candidate = by_key[hit.doc_key] = Candidate(hit.doc_key, hit.domain, "")
        if candidate.score is None:
            candidate.score = hit.score
            candidate.similarity = similarity_from_l2(hit.score, max_l2=thresholds.max_l2_distance)
            candidate.chunk_index = hit.chunk_index
    if l0_match_count == 1 and len(l0) == 1:
        by_key[l0[0].doc_key].precise = True

    def rank(c: Candidate) -> tuple:
        if c.precise:
            tier = 0
        elif c.similarity is not None and c.similarity >= thresholds.reference:
            tier = 1
        elif c.via_l0:
            tier = 2
        else:
            tier = 3
        longest = max((len(t) for t in c.l0_terms), default=0)
        return (tier, -(c.similarity if c.similarity is not None else -1.0), -longest, c.title, c.doc_key)

    return sorted(by_key.values(), key=rank)


@dataclass
class Selection:
    returned: list[Candidate]
    withheld: list[Candidate]
    blocked_domain: str | None
    level: RelevanceLevel | None
    dedup_reason: str | None

    @property
    def found(self) -> bool:
        return bool(self.returned)


def selection_decide(
    *,
    candidates: list[Candidate],
    memory: SessionRetrievals,
    thresholds: Thresholds,
    domain_dedup: str,
    max_supplement: int,
) -> Selection:
    """Withhold what the session already has, apply domain dedup, pick primary + supplement, and
    name the level of what is returned.

    - Documents already returned to this session are withheld (seed 004 Part A).
    - ``hard`` domain dedup (seed 000 Phase 2): when the best remaining document lies in a domain
      this session already retrieved, the whole call is blocked.
    - The level describes what is returned: PRECISE only when the unique L0 document is the
      primary; otherwise FS-2 on the returned documents' best similarity (L0 documents without a
      passing similarity make it REFERENCE).
    - DEDUPED: candidates existed but all were withheld, or hard mode blocked the call.
      dedup_reason "domain_retrieved" when blocked, else "doc_retrieved" whenever a candidate
      was withheld, else None.
    """
    passing = [c for c in candidates if c.passes(thresholds)]
    have = memory.doc_keys
    withheld = [c for c in passing if c.doc_key in have]
    remaining = [c for c in passing if c.doc_key not in have]

    blocked_domain = None
    if domain_dedup == "hard" and remaining and remaining[0].domain in memory.domains:
        blocked_domain = remaining[0].domain
    returned = [] if blocked_domain else remaining[: 1 + max(0, max_supplement)]

    if blocked_domain:
        return Selection([], withheld, blocked_domain, RelevanceLevel.DEDUPED, "domain_retrieved")
    dedup_reason = "doc_retrieved" if withheld else None
    if not returned:
        level = RelevanceLevel.DEDUPED if withheld else None
        return Selection([], withheld, None, level, dedup_reason)
    if returned[0].precise:
        level = RelevanceLevel.PRECISE
    else:
        similarities = [c.similarity for c in returned if c.similarity is not None]
        l0_returned = sum(1 for c in returned if c.via_l0)
        # Not precise: any L0 documents here are one of several matches (the others ranked lower
        # or were withheld), so they count as "L0 matchCount >= 2".
        level = relevance_level_decide(
            l0_match_count=max(2, l0_returned) if l0_returned else 0,
            top_similarity=max(similarities) if similarities else None,
            thresholds=thresholds,
        )
    return Selection(returned, withheld, None, level, dedup_reason)
