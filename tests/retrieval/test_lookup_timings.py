"""The timings staff read in a lookup's details are durations of the call's own phases: none
negative, and the phases (which run one after another) add up to no more than the whole call."""

import pytest

from retrieval.services import lookup_knowledge

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seeds_rules")]

# Phases that run one after another inside the call (db_ms spans lexical_ms and content_ms).
PHASES = ("tracker_ms", "l0_ms", "embed_ms", "search_ms", "documents_ms", "lexical_ms", "content_ms")


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
