"""What a lookup's details tell staff, where the lookup tests leave it open: the phase timings are
durations of the call's own phases (none negative, together no more than the whole call, with
Milvus up or down), and a keyword matching more documents than the lookup looks at in detail
counts them all."""

import time

import pytest

from knowledge.vectorstore import reset_vector_store
from retrieval import tracker as tracker_module
from retrieval.services import lookup_knowledge
from retrieval.tracker import MemoryTracker
from tests.conftest import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seeds_rules")]

# Phases that run one after another inside the call (db_ms spans lexical_ms and content_ms).
PHASES = ("tracker_ms", "l0_ms", "embed_ms", "search_ms", "documents_ms", "lexical_ms", "content_ms")


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
    outcome = lookup_knowledge(query="ZQ_QUOTA 配额上限", session_id=session_id + "-2")
    assert outcome.body["found"] is True
    timings = outcome.details["timings"]
    assert set(PHASES) | {"db_ms", "total_ms"} <= set(timings)
    assert all(timings[name] >= 0 for name in timings), timings
    # Rounding each phase to 0.01 ms may add up to a little over the total.
    assert sum(timings[name] for name in PHASES) <= timings["total_ms"] + 0.1, timings
    assert timings["lexical_ms"] + timings["content_ms"] <= timings["db_ms"] + 0.02, timings
    assert timings["db_ms"] <= timings["total_ms"] + 0.01, timings


class _SlowMarks(MemoryTracker):
    """The in-process store, each mark taking 30 ms longer (as a distant Redis might)."""

    def mark_many(self, session_id, items):
        time.sleep(0.03)
        return super().mark_many(session_id, items)


def test_tracker_ms_is_the_read_plus_the_mark(corpus, session_id, monkeypatch):
    corpus.add(
        "quota.md", title="配额说明", domain="api", keywords=["ZQ_QUOTA"], chunks=["租户配额上限的设置"]
    )
    monkeypatch.setattr(tracker_module, "_tracker", _SlowMarks(ttl=3600))
    outcome = lookup_knowledge(query="ZQ_QUOTA 配额上限", session_id=session_id)
    assert outcome.details["returned_doc_keys"] == ["quota.md"]
    timings = outcome.details["timings"]
    # The read takes microseconds, the mark 30 ms: their sum is at least the mark's time.
    assert 30 <= timings["tracker_ms"] <= timings["total_ms"], timings


def test_with_milvus_down_no_time_is_reported_for_embedding_or_search(corpus, session_id, settings):
    corpus.add(
        "quota.md", title="配额说明", domain="api", keywords=["ZQ_QUOTA"], chunks=["租户配额上限的设置"]
    )
    settings.MILVUS_URI = f"http://127.0.0.1:{free_port()}"
    settings.MILVUS_TIMEOUT = 2
    reset_vector_store()
    outcome = lookup_knowledge(query="ZQ_QUOTA", session_id=session_id)
    assert outcome.details["vector_search"] == "unavailable"
    timings = outcome.details["timings"]
    assert (timings["embed_ms"], timings["search_ms"]) == (0.0, 0.0)
    assert all(value >= 0 for value in timings.values()), timings


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
    from retrieval.lexical import query_terms

    settings.RETRIEVAL_L1_MODE = "hybrid"
    corpus.add(
        "refund.md", title="退款处理指南", domain="payment", chunks=["退款申请提交后一般三到五个工作日到账。"]
    )
    outcome = lookup_knowledge(query="退款多久到账", session_id=session_id)
    shown = outcome.details["query_terms"]
    assert [text for text, _ in shown] == [t.text for t in query_terms("退款多久到账")]
    assert shown and all(weight == round(weight, 3) for _, weight in shown)
    assert [weight for _, weight in shown] == [round(t.weight, 3) for t in query_terms("退款多久到账")]
