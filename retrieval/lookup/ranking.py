"""From L0 matches and L1 hits to ranked candidate documents, what the session withholds, and
the relevance level of what is returned (FS-2, FS-3, seed 000 Phase 2). Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from knowledge.vectorstore import VectorHit
from observability.records import DedupReason
from retrieval.agents.tracker import SessionRetrievals
from retrieval.lookup.keyword_index import L0Match
from retrieval.lookup.level_model import FOUND_AT, band
from retrieval.lookup.lexical import lexical_evidence
from retrieval.lookup.normalisation import (
    RelevanceLevel,
    l1_level_decide,
    relevance_level_decide,
    similarity_from_l2,
)
from retrieval.lookup.query_terms import Term
from retrieval.lookup.thresholds import Thresholds

DOMAIN_DEDUP_MODES = ("off", "soft", "hard")
_LEVEL_STRENGTH: dict[RelevanceLevel | None, int] = {
    RelevanceLevel.HIGHLY_RELEVANT: 2,
    RelevanceLevel.REFERENCE: 1,
}
# A document without lexical evidence (written in another script than the query) is neither
# favoured nor held back by it.
NEUTRAL_COVERAGE = 0.5


@dataclass
class Candidate:
    """One document that L0 or L1 (or both) found."""

    doc_key: str
    domain: str
    title: str
    l0_terms: list[str] = field(default_factory=list)
    #: the document's closest L1 chunk: raw squared L2 distance, its similarity and chunk index
    l2_distance: float | None = None
    similarity: float | None = None
    chunk_index: int | None = None
    #: position of the document's first chunk in L1's order (fused order in hybrid mode)
    l1_rank: int | None = None
    #: the weighted share of the query's terms found in the document's retrieved chunks and
    #: title (``retrieval.lookup.lexical``); None without lexical evidence
    coverage: float | None = None
    #: the coverage compares query and document in one script (so it may lower the level too)
    coverage_same_script: bool = True
    #: what L1 alone says of the document (FS-2 on its similarity, moved by lexical evidence)
    l1_level: RelevanceLevel | None = None
    #: the one and only L0 match (L0 matchCount == 1); under the level model only when the
    #: matched term is specific (``retrieval.lookup.specificity``)
    precise: bool = False
    #: the best BM25 score of its chunks (hybrid search), level evidence
    bm25: float | None = None
    #: the level model's evidence and its calibrated estimate (``retrieval.lookup.level_model``)
    features: dict[str, float] | None = None
    estimate: float | None = None

    @property
    def via_l0(self) -> bool:
        return bool(self.l0_terms)

    def passes(self, by_estimate: bool = False) -> bool:
        """Returnable: an L0 match, or an L1 hit with a level (at or above REFERENCE). Other L1
        hits are never returned (FS-2). Under the level model (``by_estimate``): the PRECISE
        document, or an estimate in REFERENCE's band or above; a candidate the model does not
        apply to (``evidence.model_applies``: no text, another script) keeps the seeds' rule."""
        if by_estimate and self.estimate is not None:
            return self.precise or self.estimate >= FOUND_AT
        return self.via_l0 or self.l1_level is not None


def candidates_collect(
    *,
    l0: list[L0Match],
    hits: list[VectorHit],
    thresholds: Thresholds,
    l0_match_count: int,
    terms: tuple[Term, ...] | None = None,
    query_script: str | None = None,
    precise_if: Callable[[L0Match], bool] | None = None,
) -> list[Candidate]:
    """Every candidate document, L0 and L1 merged, ranked:

    1. the PRECISE document (L0 matchCount == 1);
    2. documents L1 gives a level, HIGHLY_RELEVANT before REFERENCE; within a level the larger
       share of the query's key terms first (no lexical evidence counts as half), then L1's
       order (the fused order of hybrid search; nearest first for a dense search). The level sums
       up the evidence, so a lexical match in the wrong language (BM25 on an English question
       over Chinese text) cannot put a weak document above a strong one; on CMRC2018 (dev half)
       ordering by key-term share put the right document first for 0.969 against 0.962 in fused
       order;
    3. the other L0 documents, those with a (low) similarity first, then longest matched term.
    L1-only documents without a level come last; they are recorded, never returned.

    ``terms`` (the query's weighted terms) and ``query_script`` (``lexical.main_script``) turn on
    lexical evidence for hits that carry their text (hybrid search). ``precise_if`` (the level
    model's rule) decides whether the unique L0 match is PRECISE; by default it always is (FS-2).
    """
    by_key = {m.doc_key: Candidate(m.doc_key, m.domain, m.title, l0_terms=list(m.terms)) for m in l0}
    texts = _hits_merge(by_key, hits, thresholds)
    for candidate in by_key.values():
        _l1_level_set(candidate, texts.get(candidate.doc_key), terms, query_script, thresholds)
    if l0_match_count == 1 and len(l0) == 1 and (precise_if is None or precise_if(l0[0])):
        by_key[l0[0].doc_key].precise = True
    return sorted(by_key.values(), key=_order_key)


def _hits_merge(
    by_key: dict[str, Candidate], hits: list[VectorHit], thresholds: Thresholds
) -> dict[str, list[str]]:
    """Fold L1's hits into the candidates (adding L1-only documents): each document's first hit
    ranks it, its nearest chunk gives its similarity; returns the hits' texts by document."""
    texts: dict[str, list[str]] = {}
    for rank, hit in enumerate(hits):  # best first: the first hit of a document ranks it
        candidate = by_key.get(hit.doc_key)
        if candidate is None:
            candidate = by_key[hit.doc_key] = Candidate(hit.doc_key, hit.domain, "")
        if candidate.l1_rank is None:
            candidate.l1_rank = rank
        if candidate.l2_distance is None or hit.l2_distance < candidate.l2_distance:
            candidate.l2_distance = hit.l2_distance
            candidate.similarity = similarity_from_l2(hit.l2_distance, max_l2=thresholds.max_l2_distance)
            candidate.chunk_index = hit.chunk_index
        if hit.lexical_score is not None:
            candidate.bm25 = max(candidate.bm25 or 0.0, hit.lexical_score)
        if hit.text:
            texts.setdefault(hit.doc_key, []).append(hit.text)
    return texts


def _l1_level_set(
    candidate: Candidate,
    texts: list[str] | None,
    terms: tuple[Term, ...] | None,
    query_script: str | None,
    thresholds: Thresholds,
) -> None:
    """The candidate's lexical evidence (from its hits' texts, when the search read them) and the
    L1 level its similarity and evidence give."""
    if terms and texts:
        evidence = lexical_evidence(terms, "\n".join(texts), query_script=query_script)
        if evidence is not None:
            candidate.coverage = evidence.coverage
            candidate.coverage_same_script = evidence.same_script
    candidate.l1_level = l1_level_decide(
        similarity=candidate.similarity,
        coverage=candidate.coverage,
        thresholds=thresholds,
        can_lower=candidate.coverage_same_script,
    )


def _order_key(c: Candidate) -> tuple:
    """The ranking of ``candidates_collect``'s docstring, as a sort key."""
    if c.precise:
        tier = 0
    elif c.l1_level is not None:
        tier = 1
    elif c.via_l0:
        tier = 2
    else:
        tier = 3
    longest = max((len(t) for t in c.l0_terms), default=0)
    strength = _LEVEL_STRENGTH.get(c.l1_level, 0)
    evidence = (c.coverage if c.coverage is not None else NEUTRAL_COVERAGE) if tier == 1 else 0.0
    order = c.l1_rank if tier == 1 and c.l1_rank is not None else 0
    return (
        tier,
        -strength,
        -evidence,
        order,
        -(c.similarity if c.similarity is not None else -1.0),
        -longest,
        c.title,
        c.doc_key,
    )


@dataclass
class Selection:
    returned: list[Candidate]
    withheld: list[Candidate]
    blocked_domain: str | None
    level: RelevanceLevel | None
    dedup_reason: DedupReason | None

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
    by_estimate: bool = False,
) -> Selection:
    """Withhold what the session already has, apply domain dedup, pick primary + supplement, and
    name the level of what is returned.

    - Documents already returned to this session are withheld (seed 004 Part A), unless only
      some of their chunks were sent and the match is in another (``SessionRetrievals.holds``).
    - ``hard`` domain dedup (seed 000 Phase 2): when the best remaining document lies in a domain
      this session already retrieved, the whole call is blocked.
    - The level describes the primary: PRECISE only when the unique L0 document is the primary;
      otherwise FS-2 on its L1 level (its similarity, moved by lexical evidence); an L0 primary
      without an L1 level is REFERENCE.
    - DEDUPED: candidates existed but all were withheld, or hard mode blocked the call.
      dedup_reason "domain_retrieved" when blocked, else "doc_retrieved" whenever a candidate
      was withheld, else None.
    """
    passing = [c for c in candidates if c.passes(by_estimate)]
    # Withheld: what the session already has of each document (its matched chunk, or all of it
    # when it was sent whole); a document sent in part comes back for a part not yet sent.
    withheld = [c for c in passing if memory.holds(c.doc_key, c.chunk_index)]
    remaining = [c for c in passing if not memory.holds(c.doc_key, c.chunk_index)]

    blocked_domain = None
    if domain_dedup == "hard" and remaining and remaining[0].domain in memory.domains:
        blocked_domain = remaining[0].domain
    returned = [] if blocked_domain else remaining[: 1 + max(0, max_supplement)]

    if blocked_domain:
        return Selection([], withheld, blocked_domain, RelevanceLevel.DEDUPED, DedupReason.DOMAIN_RETRIEVED)
    dedup_reason = DedupReason.DOC_RETRIEVED if withheld else None
    if not returned:
        level = RelevanceLevel.DEDUPED if withheld else None
        return Selection([], withheld, None, level, dedup_reason)
    primary = returned[0]
    if primary.precise:
        level = RelevanceLevel.PRECISE
    elif by_estimate and primary.estimate is not None:
        # the level model: the band of the primary's calibrated estimate
        level = band(primary.estimate)
    else:
        # The level describes the primary. Not precise: an L0 primary is one of several matches
        # (the others ranked lower or were withheld), so it counts as "L0 matchCount >= 2".
        level = relevance_level_decide(
            l0_match_count=2 if primary.via_l0 else 0,
            top_similarity=primary.similarity,
            thresholds=thresholds,
            l1_level=primary.l1_level,
        )
    return Selection(returned, withheld, None, level, dedup_reason)
