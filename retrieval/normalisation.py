"""FS-1 / FS-2: raw L2 scores to similarity, similarity and L0 matches to a relevance level.

Milvus (and milvus-lite) return the SQUARED Euclidean distance for metric L2. For unit vectors
(every embedding backend here normalises) that is ``d = 2 - 2cos``, so the seeds' formula

    similarity = 1 - min(d, max_l2) / max_l2        (max_l2 = 2.0)

gives ``similarity = cos`` clipped at 0. Feed it the raw score exactly as Milvus returns it: taking
the square root first would be the "real" L2 distance and would inflate every similarity.
"""

from __future__ import annotations

from enum import StrEnum

from retrieval import agent_texts
from retrieval.thresholds import Thresholds


class RelevanceLevel(StrEnum):
    PRECISE = "PRECISE"
    HIGHLY_RELEVANT = "HIGHLY_RELEVANT"
    REFERENCE = "REFERENCE"
    # seed 000 Phase 2: candidates existed but this session already has them (or hard domain
    # dedup blocked the call).
    DEDUPED = "DEDUPED"


def similarity_from_l2(score: float, *, max_l2: float) -> float:
    """The seeds' normalisation of a raw (squared) L2 score into [0, 1]."""
    # Float error can make the distance of identical unit vectors slightly negative.
    clipped = min(max(float(score), 0.0), max_l2)
    return 1.0 - clipped / max_l2


def relevance_level_decide(
    *, l0_match_count: int, top_similarity: float | None, thresholds: Thresholds
) -> RelevanceLevel | None:
    """FS-2 (its acceptance criteria win where the proposal differs).

    - exactly one L0 document -> PRECISE;
    - otherwise the best L1 similarity >= highly_relevant -> HIGHLY_RELEVANT (L0 hits or not);
    - a best similarity in [reference, highly_relevant) -> REFERENCE;
    - two or more L0 documents and no L1 hit >= reference -> REFERENCE;
    - nothing else is a result (None: found=false).
    """
    if l0_match_count == 1:
        return RelevanceLevel.PRECISE
    if top_similarity is not None and top_similarity >= thresholds.highly_relevant:
        return RelevanceLevel.HIGHLY_RELEVANT
    if top_similarity is not None and top_similarity >= thresholds.reference:
        return RelevanceLevel.REFERENCE
    if l0_match_count >= 2:
        return RelevanceLevel.REFERENCE
    return None


def completeness_hint(level: RelevanceLevel | str | None, language: str | None = None) -> str | None:
    """The seeds' 兜底信号 for a level (configurable) in the agent's language; None for DEDUPED
    and not found."""
    return agent_texts.completeness_hint(level, language)
