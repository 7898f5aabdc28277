"""What a lookup's details tell staff, where the lookup tests leave it open: the phase timings are
durations of the call's own phases (none negative, together no more than the whole call, with
Milvus up or down), and a keyword matching more documents than the lookup looks at in detail
counts them all."""

import time

import pytest

from knowledge.vectorstore import reset_vector_store
from retrieval.agents import tracker as tracker_module
from retrieval.agents.identity import memory_session_key
from retrieval.agents.tracker import MemoryTracker, TrackerUnavailable, fallback_tracker
from retrieval.lookup.normalisation import similarity_from_l2
from retrieval.services import lookup_knowledge
from tests.conftest import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seeds_rules")]

# Phases that run one after another inside the call (db_ms spans lexical_ms and content_ms).
PHASES = (
    "tracker_ms",
    "filter_ms",
    "l0_ms",
    "embed_ms",
    "search_ms",
    "documents_ms",
    "lexical_ms",
    "content_ms",
)


@pytest.fixture
def corpus(reused_corpus):
    """This module's corpus, on the collection the lookup tests share (it is emptied after each
    test): the lookup, not the collection's creation, is what these tests time."""
    return reused_corpus


def test_phase_timings_are_durations_within_the_call(corpus, session_id):
    corpus.add(
        "quota.md", title="配额说明", domain="api", keywords=["ZQ_QUOTA"], chunks=["租户配额上限的设置"]
    )
    lookup_knowledge(query="ZQ_QUOTA 配额上限", session_id=session_id)  # loads and caches
    # Again in another session: the query vector is cached, the call takes milliseconds, and
    # it marks the session (so tracker_ms covers the read and the mark).
    started = time.perf_counter()
    outcome = lookup_knowledge(query="ZQ_QUOTA 配额上限", session_id=session_id + "-2")
    wall_ms = (time.perf_counter() - started) * 1000
    assert outcome.body["found"] is True
    assert outcome.details["vector_search"] == "ok"
    timings = outcome.details["timings"]
    assert set(PHASES) | {"db_ms", "total_ms"} <= set(timings)
    # The call timed from outside bounds the whole it reports; each value is in ms to 0.01.
    assert 0 < timings["total_ms"] <= wall_ms, (timings, wall_ms)
    assert all(value == round(value, 2) for value in timings.values()), timings
    assert all(timings[name] >= 0 for name in timings), timings
    # Rounding each phase to 0.01 ms may add up to a little over the total.
    assert sum(timings[name] for name in PHASES) <= timings["total_ms"] + 0.1, timings
    assert timings["lexical_ms"] + timings["content_ms"] <= timings["db_ms"] + 0.02, timings
    assert timings["db_ms"] <= timings["total_ms"] + 0.01, timings


def test_phase_timings_are_given_to_the_hundredth_of_a_millisecond(corpus, session_id):
    corpus.add(
        "quota.md", title="配额说明", domain="api", keywords=["ZQ_QUOTA"], chunks=["租户配额上限的设置"]
    )
    seen: dict[str, list[float]] = {}
    for i in range(8):
        # A query of its own each time (embedded and searched), found and marked.
        outcome = lookup_knowledge(query=f"ZQ_QUOTA 配额 {i}", session_id=f"{session_id}-{i}")
        assert outcome.details["returned_doc_keys"] == ["quota.md"]
        for name, value in outcome.details["timings"].items():
            seen.setdefault(name, []).append(value)
    # A value to 0.01 ms lies on a tenth one time in ten: over eight calls, some value does not.
    for name in ("tracker_ms", "embed_ms", "search_ms", "total_ms"):
        assert all(value == round(value, 2) for value in seen[name]), (name, seen[name])
        assert any(round(value, 1) != value for value in seen[name]), (name, seen[name])


class _SlowMarks(MemoryTracker):
    """The in-process store, each mark taking 0.2 s longer (as a distant Redis might), timing
    itself: the lookup's tracker_ms must cover it."""

    took_ms = 0.0

    def mark_many(self, session_id, items):
        started = time.perf_counter()
        time.sleep(0.2)
        marked = super().mark_many(session_id, items)
        self.took_ms = (time.perf_counter() - started) * 1000
        return marked


def test_tracker_ms_is_the_read_plus_the_mark(corpus, session_id, monkeypatch):
    corpus.add(
        "quota.md", title="配额说明", domain="api", keywords=["ZQ_QUOTA"], chunks=["租户配额上限的设置"]
    )
    slow = _SlowMarks(ttl=3600)
    monkeypatch.setattr(tracker_module, "_tracker", slow)
    outcome = lookup_knowledge(query="ZQ_QUOTA 配额上限", session_id=session_id)
    assert outcome.details["returned_doc_keys"] == ["quota.md"]
    timings = outcome.details["timings"]
    # The read takes microseconds, the mark 200 ms: their sum in ms is at least what the mark
    # timed of itself (less the rounding to 0.01), and no more than the whole call.
    assert slow.took_ms >= 200
    assert slow.took_ms - 0.01 <= timings["tracker_ms"] <= timings["total_ms"], (timings, slow.took_ms)


class _MarksRefused(MemoryTracker):
    """The store answers the read, then fails on the mark (Redis gone between the two)."""

    def mark_many(self, session_id, items):
        raise TrackerUnavailable("connection refused")


def test_a_mark_refused_by_the_store_is_kept_in_this_process_as_degraded(corpus, session_id, monkeypatch):
    corpus.add(
        "quota.md", title="配额说明", domain="api", keywords=["ZQ_QUOTA"], chunks=["租户配额上限的设置"]
    )
    monkeypatch.setattr(tracker_module, "_tracker", _MarksRefused(ttl=3600))
    outcome = lookup_knowledge(query="ZQ_QUOTA 配额上限", session_id=session_id)
    assert outcome.status == "DEGRADED"
    assert outcome.body["found"] is True and outcome.body["retrievedDomainsThisSession"] == ["api"]
    assert outcome.details["action_memory"] == "memory-fallback"
    assert any("marked in this process's memory" in d for d in outcome.details["degraded"])
    key = memory_session_key(agent_id=None, agent="", session_id=session_id)
    assert fallback_tracker().snapshot(key).doc_keys == {"quota.md"}


def test_with_milvus_down_no_time_is_reported_for_embedding_or_search(corpus, session_id, settings):
    corpus.add(
        "quota.md", title="配额说明", domain="api", keywords=["ZQ_QUOTA"], chunks=["租户配额上限的设置"]
    )
    settings.MILVUS_URI = f"http://127.0.0.1:{free_port()}"
    settings.MILVUS_TIMEOUT = 2
    reset_vector_store()
    outcome = lookup_knowledge(query="ZQ_QUOTA", session_id=session_id)
    assert outcome.details["vector_search"] == "unavailable"
    # No query vector and no L1 hits were looked up, so none came from a cache.
    assert outcome.details["query_vector_cached"] is False
    assert outcome.details["l1_cached"] is False
    timings = outcome.details["timings"]
    assert (timings["embed_ms"], timings["search_ms"]) == (0.0, 0.0)
    assert all(value >= 0 for value in timings.values()), timings


def test_the_details_similarities_are_fs1_of_the_raw_scores_to_fixed_places(corpus, session_id):
    corpus.add("quota.md", title="配额说明", domain="api", chunks=["租户配额上限的设置"])
    corpus.add("billing.md", title="计费规则", domain="api", chunks=["按调用次数计费。"])
    details = lookup_knowledge(query="租户配额上限", session_id=session_id, dry_run=True).details
    max_l2 = details["thresholds"]["max_l2_distance"]
    candidates = details["l1_candidates"]
    assert {c["doc_key"] for c in candidates} == {"quota.md", "billing.md"}
    for c in candidates:
        assert c["similarity"] == round(similarity_from_l2(c["score"], max_l2=max_l2), 6), c
    best = min(c["score"] for c in candidates)
    assert details["l1_top_score"] == best == details["l1_scores"][0]
    assert details["l1_top_similarity"] == round(similarity_from_l2(best, max_l2=max_l2), 4)


def test_hybrid_details_give_a_candidate_s_coverage_to_four_places(corpus, session_id, settings):
    from retrieval.lookup.lexical import lexical_evidence
    from retrieval.lookup.query_terms import query_terms

    settings.RETRIEVAL_L1_MODE = "hybrid"
    corpus.add(
        "refund.md", title="退款处理指南", domain="payment", chunks=["退款申请提交后一般三到五个工作日到账。"]
    )
    query = "信用卡退款多久到账"  # 信用卡 is nowhere in the document
    outcome = lookup_knowledge(query=query, session_id=session_id, dry_run=True)
    refund = next(c for c in outcome.details["l1_candidates"] if c["doc_key"] == "refund.md")
    text = "退款处理指南\n退款申请提交后一般三到五个工作日到账。"
    expected = lexical_evidence(query_terms(query), text, query_script="cjk").coverage
    assert 0 < expected < 1 and round(expected, 3) != round(expected, 4)
    assert refund["coverage"] == round(expected, 4)


def test_a_keyword_in_more_documents_than_looked_at_counts_them_all(corpus, session_id):
    # 51 documents naming the keyword: all counted, the 50 best-ranked looked at (docs/lookup.md).
    for i in range(51):
        corpus.add(
            f"k{i:02}.md", title=f"文档 {i:02}", domain="api", keywords=["ZQ_SHARED"], chunks=[f"第 {i} 篇"]
        )
    outcome = lookup_knowledge(query="ZQ_SHARED", session_id=session_id)
    assert outcome.details["l0_match_count"] == 51
    assert len(outcome.details["l0_doc_keys"]) == 50
    assert outcome.body["relevanceLevel"] == "REFERENCE"  # several matches, no L1 level


def test_hybrid_details_list_the_query_s_terms_with_weights_to_three_places(corpus, session_id, settings):
    from retrieval.lookup.query_terms import query_terms

    settings.RETRIEVAL_L1_MODE = "hybrid"
    corpus.add(
        "refund.md", title="退款处理指南", domain="payment", chunks=["退款申请提交后一般三到五个工作日到账。"]
    )
    outcome = lookup_knowledge(query="退款多久到账", session_id=session_id)
    shown = outcome.details["query_terms"]
    assert [text for text, _ in shown] == [t.text for t in query_terms("退款多久到账")]
    assert shown and all(weight == round(weight, 3) for _, weight in shown)
    assert [weight for _, weight in shown] == [round(t.weight, 3) for t in query_terms("退款多久到账")]
