"""Ranking and selection as the agent meets them: which documents come back, in which order, what
the session withholds, when hard domain dedup blocks, and the level the answer carries.

Through the real parts below the lookup's I/O: L0 matches and Milvus hits as the keyword index and
the vector store return them, lexical coverage from ``retrieval.lookup.lexical``, and the session's memory
read from the in-process action memory. Thresholds are explicit (the seeds' 0.75 / 0.5, L2 bound
2.0), so these rules hold whatever profile is in force. A raw score s is similarity 1 - s / 2.
"""

from __future__ import annotations

import pytest

from knowledge.vectorstore import VectorHit
from retrieval.agents.tracker import MemoryTracker
from retrieval.lookup.keyword_index import L0Match
from retrieval.lookup.normalisation import RelevanceLevel
from retrieval.lookup.query_terms import Term
from retrieval.lookup.ranking import candidates_collect, selection_decide
from retrieval.lookup.thresholds import Thresholds

SEEDS = Thresholds(max_l2_distance=2.0, highly_relevant=0.75, reference=0.5)
HIGH = 0.2  # similarity 0.9: HIGHLY_RELEVANT
MIDDLE = 0.8  # similarity 0.6: REFERENCE
LOW = 1.4  # similarity 0.3: no level


def hit(doc_key: str, score: float, *, chunk: int = 0, domain: str = "api", text: str = "") -> VectorHit:
    return VectorHit(f"{doc_key}#{chunk}", doc_key, domain, chunk, score, text)


def match(doc_key: str, *terms: str, domain: str = "api", title: str = "") -> L0Match:
    return L0Match(doc_key, title or doc_key.upper(), domain, list(terms))


def keys(candidates) -> list[str]:
    return [c.doc_key for c in candidates]


def memory_of(*held: tuple[str, str]):
    tracker = MemoryTracker(ttl=3600)
    if held:
        tracker.mark_many("s", held)
    return tracker.snapshot("s")


def select(candidates, *, held=(), domain_dedup="soft", max_supplement=3):
    return selection_decide(
        candidates=candidates,
        memory=memory_of(*held),
        thresholds=SEEDS,
        domain_dedup=domain_dedup,
        max_supplement=max_supplement,
    )


# --- candidates: merged and ranked ----------------------------------------------------------------
def test_an_l0_match_and_l1_hits_on_one_document_are_one_candidate_judged_by_its_nearest_chunk():
    # Fused (hybrid) order may list a farther chunk of a document before its nearest one.
    hits = [hit("a.md", 0.9, chunk=0), hit("b.md", 0.5), hit("a.md", 0.3, chunk=2)]
    ranked = candidates_collect(l0=[match("a.md", "quota")], hits=hits, thresholds=SEEDS, l0_match_count=2)
    a = next(c for c in ranked if c.doc_key == "a.md")
    assert len(ranked) == 2
    assert a.title == "A.MD"  # the L0 match's title is kept
    assert a.l0_terms == ["quota"]
    assert a.similarity == pytest.approx(0.85)  # the nearest chunk, 2, not the first listed
    assert a.chunk_index == 2
    assert a.l1_rank == 0  # but the document ranks where its first hit stands
    assert a.l1_level == RelevanceLevel.HIGHLY_RELEVANT


def test_a_document_s_farther_chunk_listed_later_does_not_replace_its_nearest():
    hits = [hit("a.md", 0.3, chunk=1), hit("a.md", 0.9, chunk=4), hit("a.md", 0.3, chunk=7)]
    (a,) = candidates_collect(l0=[], hits=hits, thresholds=SEEDS, l0_match_count=0)
    assert (a.chunk_index, a.similarity) == (1, pytest.approx(0.85))


def test_the_one_and_only_l0_match_is_precise_and_first_even_below_a_highly_relevant_hit():
    ranked = candidates_collect(
        l0=[match("exact.md", "err_timeout")], hits=[hit("near.md", HIGH)], thresholds=SEEDS, l0_match_count=1
    )
    assert keys(ranked) == ["exact.md", "near.md"]
    assert ranked[0].precise and not ranked[1].precise


def test_an_l0_match_is_not_precise_when_other_documents_also_matched():
    # matchCount 2: only the best-ranked L0 documents become candidates, here one of them.
    ranked = candidates_collect(
        l0=[match("one.md", "quota")], hits=[hit("near.md", HIGH)], thresholds=SEEDS, l0_match_count=2
    )
    assert not ranked[0].precise and not ranked[1].precise
    assert keys(ranked) == ["near.md", "one.md"]  # an L1 level outranks a bare L0 match


def test_a_single_match_counted_beyond_the_candidates_marks_nothing_precise():
    # One L0 match counted, but its document is not among the L0 candidates (not searchable).
    ranked = candidates_collect(l0=[], hits=[hit("a.md", MIDDLE)], thresholds=SEEDS, l0_match_count=1)
    assert keys(ranked) == ["a.md"] and not ranked[0].precise


def test_candidates_rank_highly_relevant_then_reference_then_bare_l0_then_levelless_l1():
    hits = [hit("weak.md", LOW), hit("ref.md", MIDDLE), hit("high.md", HIGH)]
    ranked = candidates_collect(l0=[match("kw.md", "quota")], hits=hits, thresholds=SEEDS, l0_match_count=2)
    assert keys(ranked) == ["high.md", "ref.md", "kw.md", "weak.md"]
    assert [c.passes() for c in ranked] == [True, True, True, False]
    assert [c.l1_level for c in ranked] == [
        RelevanceLevel.HIGHLY_RELEVANT,
        RelevanceLevel.REFERENCE,
        None,
        None,
    ]


def test_within_a_level_l1_s_order_wins_over_a_slightly_higher_similarity():
    # Both REFERENCE, no lexical evidence: fused order (first.md listed first) decides.
    hits = [hit("first.md", 0.9), hit("second.md", 0.8)]
    ranked = candidates_collect(l0=[], hits=hits, thresholds=SEEDS, l0_match_count=0)
    assert keys(ranked) == ["first.md", "second.md"]


def test_within_a_level_the_larger_share_of_key_terms_comes_first_and_no_evidence_counts_as_half():
    # Two terms weighing 0.45 and 0.55: a document holding one of them has that share of the
    # query, which moves no level ([0.4, 0.6)). A document in another script has no evidence.
    terms = (Term("alpha", 0.45), Term("omega", 0.55))
    hits = [
        hit("less.md", MIDDLE, text="alpha only here"),
        hit("none.md", MIDDLE, text="只有中文的内容"),
        hit("more.md", MIDDLE, text="omega only here"),
    ]
    ranked = candidates_collect(
        l0=[], hits=hits, thresholds=SEEDS, l0_match_count=0, terms=terms, query_script="latin"
    )
    assert keys(ranked) == ["more.md", "none.md", "less.md"]
    assert [c.coverage for c in ranked] == [pytest.approx(0.55), None, pytest.approx(0.45)]
    assert {c.l1_level for c in ranked} == {RelevanceLevel.REFERENCE}


def test_lexical_evidence_moves_a_candidate_s_level_and_so_its_rank():
    terms = (Term("quota", 1.0), Term("limit", 1.0))
    hits = [
        hit("near.md", HIGH, text="nothing of the question"),  # 0.9 but no key term: REFERENCE
        hit("worded.md", MIDDLE, text="the quota limit of a tenant"),  # 0.6, all terms: HIGHLY
    ]
    ranked = candidates_collect(
        l0=[], hits=hits, thresholds=SEEDS, l0_match_count=0, terms=terms, query_script="latin"
    )
    assert keys(ranked) == ["worded.md", "near.md"]
    assert [c.l1_level for c in ranked] == [RelevanceLevel.HIGHLY_RELEVANT, RelevanceLevel.REFERENCE]


def test_an_identifier_found_across_scripts_raises_a_level_and_one_missing_lowers_none():
    # An English question naming an error code, over Chinese documents: the code is spelt the same
    # in both, the English word is not comparable.
    terms = (Term("err_quota", 1.0, "latin", identifier=True), Term("meaning", 1.0, "latin"))
    hits = [
        hit("names-it.md", MIDDLE, text="错误码 err_quota 的含义与处理"),  # 0.6, code present
        hit("silent.md", HIGH, text="租户配额的说明和处理办法"),  # 0.9, code absent
    ]
    ranked = candidates_collect(
        l0=[], hits=hits, thresholds=SEEDS, l0_match_count=0, terms=terms, query_script="latin"
    )
    by_key = {c.doc_key: c for c in ranked}
    assert by_key["names-it.md"].l1_level == RelevanceLevel.HIGHLY_RELEVANT  # raised from REFERENCE
    assert by_key["silent.md"].l1_level == RelevanceLevel.HIGHLY_RELEVANT  # not lowered
    assert not by_key["silent.md"].coverage_same_script


def test_lexical_evidence_reads_every_retrieved_chunk_of_a_document():
    terms = (Term("quota", 1.0), Term("limit", 1.0))
    hits = [hit("a.md", MIDDLE, chunk=0, text="the quota"), hit("a.md", 1.0, chunk=1, text="its limit")]
    (a,) = candidates_collect(
        l0=[], hits=hits, thresholds=SEEDS, l0_match_count=0, terms=terms, query_script="latin"
    )
    assert a.coverage == pytest.approx(1.0)
    assert a.l1_level == RelevanceLevel.HIGHLY_RELEVANT


def test_without_query_terms_there_is_no_lexical_evidence():
    hits = [hit("a.md", MIDDLE, text="the quota limit")]
    (a,) = candidates_collect(
        l0=[], hits=hits, thresholds=SEEDS, l0_match_count=0, terms=(), query_script="latin"
    )
    assert a.coverage is None and a.l1_level == RelevanceLevel.REFERENCE


def test_bare_l0_matches_with_a_similarity_come_first_then_the_longest_matched_term():
    l0 = [
        match("a-short.md", "ab", title="T"),
        match("z-long.md", "abcdef", title="T"),
        match("m-mid.md", "abcd", title="T"),
        match("seen.md", "ab", title="T"),
        match("nearer.md", "ab", title="T"),
    ]
    hits = [hit("seen.md", 1.6), hit("nearer.md", 1.2)]  # similarities 0.2 and 0.4: no level
    ranked = candidates_collect(l0=l0, hits=hits, thresholds=SEEDS, l0_match_count=5)
    assert keys(ranked) == ["nearer.md", "seen.md", "z-long.md", "m-mid.md", "a-short.md"]


def test_a_bare_l0_match_l1_found_at_similarity_zero_still_comes_before_one_l1_did_not_find():
    l0 = [match("a-unseen.md", "abcdef", title="T"), match("z-far.md", "ab", title="T")]
    hits = [hit("z-far.md", 2.5)]  # beyond the L2 bound: similarity 0
    ranked = candidates_collect(l0=l0, hits=hits, thresholds=SEEDS, l0_match_count=2)
    assert ranked[0].similarity == 0.0
    assert keys(ranked) == ["z-far.md", "a-unseen.md"]


def test_lexical_evidence_does_not_order_bare_l0_matches_their_similarity_does():
    # Neither gets a level (similarities under 0.5, shares of the key terms that move none).
    terms = (Term("alpha", 0.45), Term("omega", 0.55))
    l0 = [match("a.md", "kw", title="T"), match("b.md", "kw", title="T")]
    hits = [hit("a.md", 1.1, text="alpha"), hit("b.md", 1.4, text="omega")]  # 0.45 and 0.3
    ranked = candidates_collect(
        l0=l0, hits=hits, thresholds=SEEDS, l0_match_count=2, terms=terms, query_script="latin"
    )
    assert [c.l1_level for c in ranked] == [None, None]
    assert keys(ranked) == ["a.md", "b.md"]


def test_equal_bare_l0_matches_are_ordered_by_title_then_doc_key():
    l0 = [
        match("b.md", "ab", title="Beta"),
        match("c.md", "ab", title="Alpha"),
        match("a.md", "ab", title="Beta"),
    ]
    ranked = candidates_collect(l0=l0, hits=[], thresholds=SEEDS, l0_match_count=3)
    assert keys(ranked) == ["c.md", "a.md", "b.md"]


# --- selection: withheld, dedup, primary + supplement, level ----------------------------------------
def _ranked(*, l0=(), hits=(), l0_match_count=None, **kwargs):
    l0 = list(l0)
    return candidates_collect(
        l0=l0,
        hits=list(hits),
        thresholds=SEEDS,
        l0_match_count=len(l0) if l0_match_count is None else l0_match_count,
        **kwargs,
    )


def test_documents_the_session_has_are_withheld_and_the_next_best_is_the_primary():
    ranked = _ranked(hits=[hit("a.md", HIGH), hit("b.md", MIDDLE), hit("c.md", MIDDLE)])
    selection = select(ranked, held=[("api", "a.md")])
    assert keys(selection.returned) == ["b.md", "c.md"]
    assert keys(selection.withheld) == ["a.md"]
    assert selection.level == RelevanceLevel.REFERENCE  # the primary's level, not the withheld one's
    assert selection.dedup_reason == "doc_retrieved"
    assert selection.found


def test_a_document_held_under_another_domain_is_still_withheld():
    ranked = _ranked(hits=[hit("a.md", HIGH, domain="api"), hit("b.md", MIDDLE)])
    selection = select(ranked, held=[("elsewhere", "a.md")])
    assert keys(selection.returned) == ["b.md"] and keys(selection.withheld) == ["a.md"]


def test_nothing_withheld_means_no_dedup_reason():
    selection = select(_ranked(hits=[hit("a.md", HIGH)]), held=[("api", "other.md")])
    assert keys(selection.returned) == ["a.md"]
    assert selection.withheld == [] and selection.dedup_reason is None
    assert selection.level == RelevanceLevel.HIGHLY_RELEVANT


def test_hits_without_a_level_are_never_returned_nor_counted_as_withheld():
    ranked = _ranked(hits=[hit("a.md", MIDDLE), hit("weak.md", LOW), hit("held-weak.md", LOW)])
    selection = select(ranked, held=[("api", "held-weak.md")], max_supplement=5)
    assert keys(selection.returned) == ["a.md"]
    assert selection.withheld == [] and selection.dedup_reason is None


def test_primary_plus_at_most_max_supplement_are_returned():
    ranked = _ranked(hits=[hit(f"d{i}.md", MIDDLE) for i in range(5)])
    assert keys(select(ranked, max_supplement=2).returned) == ["d0.md", "d1.md", "d2.md"]
    assert keys(select(ranked, max_supplement=0).returned) == ["d0.md"]
    assert keys(select(ranked, max_supplement=-3).returned) == ["d0.md"]  # a primary always


def test_everything_withheld_is_deduped_not_found():
    ranked = _ranked(hits=[hit("a.md", HIGH), hit("b.md", MIDDLE)])
    selection = select(ranked, held=[("api", "a.md"), ("api", "b.md")])
    assert selection.returned == [] and not selection.found
    assert keys(selection.withheld) == ["a.md", "b.md"]
    assert selection.level == RelevanceLevel.DEDUPED
    assert (selection.dedup_reason, selection.blocked_domain) == ("doc_retrieved", None)


def test_no_passing_candidate_is_not_found_without_a_level():
    selection = select(_ranked(hits=[hit("weak.md", LOW)]))
    assert selection.returned == [] and selection.withheld == []
    assert (selection.level, selection.dedup_reason, selection.blocked_domain) == (None, None, None)
    assert not selection.found


def test_hard_dedup_blocks_when_the_best_remaining_document_lies_in_a_retrieved_domain():
    ranked = _ranked(hits=[hit("a.md", HIGH, domain="api"), hit("b.md", MIDDLE, domain="infra")])
    selection = select(ranked, held=[("api", "old.md")], domain_dedup="hard")
    assert selection.returned == [] and not selection.found
    assert selection.blocked_domain == "api"
    assert selection.level == RelevanceLevel.DEDUPED
    assert selection.dedup_reason == "domain_retrieved"


def test_hard_dedup_keeps_the_withheld_documents_when_it_blocks():
    ranked = _ranked(hits=[hit("held.md", HIGH, domain="api"), hit("b.md", MIDDLE, domain="api")])
    selection = select(ranked, held=[("api", "held.md")], domain_dedup="hard")
    assert keys(selection.withheld) == ["held.md"]
    assert selection.blocked_domain == "api" and selection.dedup_reason == "domain_retrieved"


def test_hard_dedup_answers_when_only_a_lower_document_lies_in_a_retrieved_domain():
    ranked = _ranked(hits=[hit("a.md", HIGH, domain="api"), hit("b.md", MIDDLE, domain="infra")])
    selection = select(ranked, held=[("infra", "old.md")], domain_dedup="hard")
    assert keys(selection.returned) == ["a.md", "b.md"]
    assert selection.blocked_domain is None and selection.dedup_reason is None
    assert selection.level == RelevanceLevel.HIGHLY_RELEVANT


@pytest.mark.parametrize("mode", ["soft", "off"])
def test_soft_and_off_never_block_a_retrieved_domain(mode):
    ranked = _ranked(hits=[hit("a.md", HIGH, domain="api")])
    selection = select(ranked, held=[("api", "old.md")], domain_dedup=mode)
    assert keys(selection.returned) == ["a.md"] and selection.blocked_domain is None


def test_hard_dedup_with_nothing_remaining_is_deduped_by_documents_not_blocked():
    ranked = _ranked(hits=[hit("a.md", HIGH, domain="api")])
    selection = select(ranked, held=[("api", "a.md")], domain_dedup="hard")
    assert selection.blocked_domain is None
    assert (selection.level, selection.dedup_reason) == (RelevanceLevel.DEDUPED, "doc_retrieved")


def test_the_unique_l0_match_as_primary_is_precise():
    ranked = _ranked(l0=[match("exact.md", "err_timeout")], hits=[hit("near.md", HIGH)])
    selection = select(ranked)
    assert keys(selection.returned) == ["exact.md", "near.md"]
    assert selection.level == RelevanceLevel.PRECISE


def test_the_unique_l0_match_withheld_leaves_the_level_to_the_next_primary():
    ranked = _ranked(l0=[match("exact.md", "err_timeout")], hits=[hit("near.md", MIDDLE)])
    selection = select(ranked, held=[("api", "exact.md")])
    assert keys(selection.returned) == ["near.md"]
    assert selection.level == RelevanceLevel.REFERENCE


def test_a_lone_returned_l0_match_of_several_is_reference_not_precise():
    # matchCount 2, the other match withheld: FS-2's "L0 >= 2 and no L1 level" is REFERENCE.
    ranked = _ranked(l0=[match("a.md", "quota"), match("b.md", "quota")])
    selection = select(ranked, held=[("api", "a.md")])
    assert keys(selection.returned) == ["b.md"]
    assert selection.level == RelevanceLevel.REFERENCE


def test_an_l0_primary_with_a_highly_relevant_hit_is_highly_relevant():
    ranked = _ranked(l0=[match("a.md", "quota"), match("b.md", "quota")], hits=[hit("a.md", HIGH)])
    assert select(ranked).level == RelevanceLevel.HIGHLY_RELEVANT


def test_the_level_is_the_primary_s_lexically_moved_l1_level():
    terms = (Term("quota", 1.0), Term("limit", 1.0))
    ranked = _ranked(
        hits=[hit("a.md", MIDDLE, text="quota limit")], terms=terms, query_script="latin"
    )  # 0.6 with every key term: one level up
    assert select(ranked).level == RelevanceLevel.HIGHLY_RELEVANT


def test_with_query_terms_a_document_l1_gave_no_text_has_no_lexical_evidence():
    # Hybrid search: the hits carry their text; an L0 match L1 did not find has none to judge.
    terms = (Term("quota", 1.0), Term("limit", 1.0))
    ranked = _ranked(
        l0=[match("kw.md", "quota"), match("other.md", "quota")],
        hits=[hit("other.md", MIDDLE, text="the quota limit")],
        terms=terms,
        query_script="latin",
    )
    by_key = {c.doc_key: c for c in ranked}
    assert by_key["kw.md"].coverage is None
    assert by_key["other.md"].coverage == pytest.approx(1.0)
    assert keys(ranked) == ["other.md", "kw.md"]


@pytest.mark.parametrize("configured", ["hard", " Hard ", "HARD"])
def test_hard_dedup_as_configured_blocks(settings, configured):
    from retrieval.lookup.pipeline import domain_dedup_mode

    settings.RETRIEVAL_DOMAIN_DEDUP = configured
    ranked = _ranked(hits=[hit("a.md", HIGH, domain="api")])
    selection = select(ranked, held=[("api", "old.md")], domain_dedup=domain_dedup_mode())
    assert selection.blocked_domain == "api" and selection.returned == []
