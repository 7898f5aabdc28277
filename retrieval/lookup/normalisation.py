"""FS-1 / FS-2: raw L2 scores to similarity, similarity and L0 matches to a relevance level.

Milvus (and milvus-lite) return the SQUARED Euclidean distance for metric L2. For unit vectors
(every embedding backend here normalises) that is ``d = 2 - 2cos``, so the seeds' formula

    similarity = 1 - min(d, max_l2) / max_l2        (max_l2 = 2.0)

gives ``similarity = cos`` clipped at 0. Feed it the raw score exactly as Milvus returns it: taking
the square root first would be the "real" L2 distance and would inflate every similarity.
"""

from __future__ import annotations

from observability.records import RelevanceLevel
from retrieval.agents import texts as agent_texts
from retrieval.lookup.thresholds import Thresholds


def similarity_from_l2(score: float, *, max_l2: float) -> float:
    """The seeds' normalisation of a raw (squared) L2 score into [0, 1]."""
    # Float error can make the distance of identical unit vectors slightly negative.
    clipped = min(max(float(score), 0.0), max_l2)
    return 1.0 - clipped / max_l2


# Lexical evidence (``retrieval.lookup.lexical.lexical_evidence``, the weighted share of the query's key
# terms found in the candidate). The same for every model: it measures text, not vectors. Chosen
# on the CMRC2018 trial dev half and confirmed on its test half and the demo set (docs/lookup.md
# "How levels are decided"). With the USE profile on the dev half, lexical evidence takes
# answerable questions found from 0.856 to 0.973 and unanswerable ones reported not-found from
# 0.72 to 0.90, PRECISE / HIGHLY_RELEVANT / REFERENCE precision at 1.0 / 0.981 / 0.922.
LEXICAL_STRONG = 0.6  # most of the key terms present: one level up
LEXICAL_WEAK = 0.4  # most key terms absent: one level down


def l1_level_decide(
    *,
    similarity: float | None,
    coverage: float | None,
    thresholds: Thresholds,
    can_lower: bool = True,
) -> RelevanceLevel | None:
    """What L1 alone says of one document: FS-2 on its similarity (>= highly_relevant:
    HIGHLY_RELEVANT; >= reference: REFERENCE; else nothing), then moved one level by lexical
    evidence when there is some (``coverage`` not None): up when most key terms of the query are
    in the document, down when most are absent, unless ``can_lower`` is False (evidence across
    scripts, which cannot see what the query says in its own language)."""
    if similarity is None:
        return None
    if similarity >= thresholds.highly_relevant:
        rank = 2
    elif similarity >= thresholds.reference:
        rank = 1
    else:
        rank = 0
    if coverage is not None:
        if coverage >= LEXICAL_STRONG:
            rank = min(rank + 1, 2)
        elif coverage < LEXICAL_WEAK and can_lower:
            rank = max(rank - 1, 0)
    return (None, RelevanceLevel.REFERENCE, RelevanceLevel.HIGHLY_RELEVANT)[rank]


def relevance_level_decide(
    *,
    l0_match_count: int,
    top_similarity: float | None,
    thresholds: Thresholds,
    l1_level: RelevanceLevel | str | None = "from-similarity",
) -> RelevanceLevel | None:
    """FS-2 (its acceptance criteria win where the proposal differs).

    - exactly one L0 document -> PRECISE;
    - otherwise the best L1 similarity >= highly_relevant -> HIGHLY_RELEVANT (L0 hits or not);
    - a best similarity in [reference, highly_relevant) -> REFERENCE;
    - two or more L0 documents and no L1 hit >= reference -> REFERENCE;
    - nothing else is a result (None: found=false).

    ``l1_level``: the level L1 gives the best document when lexical evidence moved it
    (``l1_level_decide``); by default it is FS-2 on ``top_similarity`` alone.
    """
    if l0_match_count == 1:
        return RelevanceLevel.PRECISE
    if l1_level == "from-similarity":
        l1_level = l1_level_decide(similarity=top_similarity, coverage=None, thresholds=thresholds)
    if l1_level is not None:
        return RelevanceLevel(l1_level)
    if l0_match_count >= 2:
        return RelevanceLevel.REFERENCE
    return None


def completeness_hint(level: RelevanceLevel | str | None, language: str | None = None) -> str | None:
    """The seeds' 兜底信号 for a level (configurable) in the agent's language; None for DEDUPED
    and not found."""
    return agent_texts.completeness_hint(level, language)
