"""FS-2 with lexical evidence, at the edges the acceptance tests leave open: a level moved up from
the top stays at the top, one moved down from the bottom stays out, the evidence bounds, and the
level a lookup gives when L1's level of its primary is already known (moved, or taken away)."""

import pytest

from retrieval.lookup.normalisation import (
    LEXICAL_STRONG,
    LEXICAL_WEAK,
    RelevanceLevel,
    l1_level_decide,
    relevance_level_decide,
    similarity_from_l2,
)
from retrieval.lookup.thresholds import Thresholds

SEEDS = Thresholds(max_l2_distance=2.0, highly_relevant=0.75, reference=0.5)
HIGH = RelevanceLevel.HIGHLY_RELEVANT
REF = RelevanceLevel.REFERENCE


@pytest.mark.parametrize(
    ("similarity", "coverage", "level"),
    [
        (0.9, 1.0, HIGH),  # already the top level: all key terms present keep it there
        (0.75, LEXICAL_STRONG, HIGH),
        (0.2, 0.0, None),  # below REFERENCE, key terms absent: still nothing
        (0.5, LEXICAL_STRONG, HIGH),  # the strong bound itself moves up
        (0.5, LEXICAL_WEAK, REF),  # the weak bound itself does not move down
        (0.75, LEXICAL_WEAK - 0.01, REF),  # just under it does
        (0.4999, LEXICAL_STRONG, REF),  # up from nothing to REFERENCE
        (0.4999, LEXICAL_STRONG - 0.01, None),
        (None, 1.0, None),  # no L1 hit: lexical evidence alone gives no level
    ],
)
def test_lexical_evidence_moves_one_level_and_never_past_the_ends(similarity, coverage, level):
    assert l1_level_decide(similarity=similarity, coverage=coverage, thresholds=SEEDS) == level


def test_the_levels_follow_the_thresholds_in_force():
    strict = Thresholds(max_l2_distance=2.0, highly_relevant=0.9, reference=0.8)
    assert l1_level_decide(similarity=0.85, coverage=None, thresholds=strict) == REF
    assert l1_level_decide(similarity=0.79, coverage=None, thresholds=strict) is None
    assert l1_level_decide(similarity=0.9, coverage=None, thresholds=strict) == HIGH


@pytest.mark.parametrize(("l0_match_count", "level"), [(0, None), (2, REF)])
def test_a_primary_lexical_evidence_took_out_of_l1_is_decided_by_l0_alone(l0_match_count, level):
    # Once L1's level of the primary is decided (here: none), it counts, not the similarity
    # alone (0.9 would be HIGHLY_RELEVANT).
    assert (
        relevance_level_decide(
            l0_match_count=l0_match_count, top_similarity=0.9, thresholds=SEEDS, l1_level=None
        )
        == level
    )


@pytest.mark.parametrize("l1_level", [HIGH, REF, "HIGHLY_RELEVANT", "REFERENCE"])
def test_a_known_l1_level_of_the_primary_is_the_answer_s_level(l1_level):
    # The similarity (0.1) would give nothing: the level L1 settled on wins, as a RelevanceLevel.
    level = relevance_level_decide(l0_match_count=3, top_similarity=0.1, thresholds=SEEDS, l1_level=l1_level)
    assert level == l1_level and isinstance(level, RelevanceLevel)


def test_a_single_l0_match_is_precise_whatever_l1_says():
    assert relevance_level_decide(l0_match_count=1, top_similarity=0.1, thresholds=SEEDS, l1_level=None) == (
        RelevanceLevel.PRECISE
    )


def test_a_distance_float_error_made_negative_is_similarity_one_not_more():
    assert similarity_from_l2(-1e-6, max_l2=2.0) == 1.0


@pytest.mark.parametrize("l0_match_count", [2, 3, 60])
def test_several_l0_matches_without_an_l1_level_are_reference(l0_match_count):
    level = relevance_level_decide(l0_match_count=l0_match_count, top_similarity=None, thresholds=SEEDS)
    assert level == REF


def test_evidence_that_may_not_lower_still_raises():
    # Evidence across scripts (can_lower False) cannot see what the query says in its own words.
    assert l1_level_decide(similarity=0.8, coverage=0.0, thresholds=SEEDS, can_lower=False) == HIGH
    assert l1_level_decide(similarity=0.6, coverage=0.1, thresholds=SEEDS, can_lower=False) == REF
    assert l1_level_decide(similarity=0.6, coverage=0.9, thresholds=SEEDS, can_lower=False) == HIGH
