"""Dashboard selectors: exact counts over invocations seeded with known values."""

from datetime import UTC, datetime, timedelta

import pytest

from observability import selectors
from observability.models import ToolInvocation
from observability.selectors import InvocationFilter, invocations_filtered
from tests.observability.factories import ToolInvocationFactory

NOW = datetime(2026, 3, 10, 12, 30, tzinfo=UTC)
DAY = InvocationFilter(start=NOW - timedelta(days=1), end=NOW)


def _counts(rows):
    return {row["label"]: (row["count"], row["percent"]) for row in rows}


@pytest.fixture
def seeded(db):
    """20 lookups in the last day, plus calls outside the range, of another tool and an error."""
    at = NOW - timedelta(hours=2)
    for _ in range(4):
        ToolInvocationFactory(relevance_level="PRECISE", similarity=0.95, created_at=at, session_id="a")
    for i in range(6):
        ToolInvocationFactory(
            relevance_level="HIGHLY_RELEVANT", similarity=0.8, created_at=at, session_id=f"b{i % 2}"
        )
    for _ in range(5):
        ToolInvocationFactory(relevance_level="REFERENCE", similarity=0.6, created_at=at - timedelta(hours=3))
    ToolInvocationFactory(
        relevance_level="DEDUPED", dedup_reason="doc_retrieved", similarity=0.9, created_at=at, session_id="a"
    )
    ToolInvocationFactory(
        relevance_level="DEDUPED",
        dedup_reason="domain_retrieved",
        similarity=0.7,
        created_at=at,
        session_id="a",
    )
    for _ in range(2):
        ToolInvocationFactory(relevance_level=None, similarity=0.3, query="不存在的东西", created_at=at)
    ToolInvocationFactory(relevance_level=None, similarity=None, query="ERR_UNKNOWN", created_at=at)
    # Excluded from the level distributions (but counted in status rates):
    ToolInvocationFactory(
        relevance_level=None,
        similarity=None,
        status=ToolInvocation.Status.ERROR,
        created_at=at,
        duration_ms=900,
    )
    # Outside the range, and another tool: never counted.
    ToolInvocationFactory(relevance_level="PRECISE", created_at=NOW - timedelta(days=3))
    ToolInvocationFactory(relevance_level="PRECISE", created_at=NOW)  # end is exclusive
    ToolInvocationFactory(tool_name="other_tool", relevance_level="PRECISE", created_at=at)


def test_relevance_distribution_counts_each_level_and_not_found(seeded):
    rows = selectors.relevance_distribution(qs=invocations_filtered(filters=DAY))
    assert _counts(rows) == {
        "PRECISE": (4, 20.0),
        "HIGHLY_RELEVANT": (6, 30.0),
        "REFERENCE": (5, 25.0),
        "DEDUPED": (2, 10.0),
        "not found": (3, 15.0),
    }


def test_dedup_distribution_counts_reasons_and_none(seeded):
    rows = selectors.dedup_distribution(qs=invocations_filtered(filters=DAY))
    assert _counts(rows) == {
        "doc_retrieved": (1, 5.0),
        "domain_retrieved": (1, 5.0),
        "none": (18, 90.0),
    }


def test_the_seeds_group_by_agrees_with_the_selector(seeded):
    """Seed 000 section 8's SQL, on the same rows, gives the same numbers (plus the ERROR row)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relevance_level, COUNT(*) FROM tool_invocation WHERE tool_name = 'lookup_knowledge' "
            "AND created_at >= %s AND created_at < %s GROUP BY relevance_level",
            [connection.ops.adapt_datetimefield_value(d) for d in (DAY.start, DAY.end)],
        )
        raw = dict(cursor.fetchall())
    assert raw == {"PRECISE": 4, "HIGHLY_RELEVANT": 6, "REFERENCE": 5, "DEDUPED": 2, None: 4}


def test_similarity_histogram_bins_by_005_and_splits_by_level(seeded):
    hist = selectors.similarity_histogram(qs=invocations_filtered(filters=DAY))
    assert len(hist["bins"]) == 20 and hist["bins"][15] == {"lo": 0.75, "hi": 0.8}
    assert hist["total"] == 19  # the three rows without similarity are not in it
    assert hist["levels"]["PRECISE"][19] == 4  # 0.95
    assert hist["levels"]["HIGHLY_RELEVANT"][16] == 6  # 0.80 -> [0.80, 0.85)
    assert hist["levels"]["REFERENCE"][12] == 5  # 0.60
    assert hist["levels"]["DEDUPED"][18] == 1 and hist["levels"]["DEDUPED"][14] == 1
    assert hist["levels"]["not found"][6] == 2  # 0.30
    assert sum(sum(v) for v in hist["levels"].values()) == 19


def test_similarity_of_exactly_one_falls_in_the_last_bin(db):
    ToolInvocationFactory(similarity=1.0, created_at=NOW - timedelta(hours=1))
    hist = selectors.similarity_histogram(qs=invocations_filtered(filters=DAY))
    assert hist["levels"]["HIGHLY_RELEVANT"][19] == 1


def test_distribution_over_time_stacks_per_hour_with_empty_hours(seeded):
    over = selectors.distribution_over_time(
        qs=invocations_filtered(filters=DAY), filters=DAY, field="relevance_level"
    )
    assert over["bucket"] == "hour"
    assert len(over["x"]) == 25  # 11:00 yesterday .. 12:00 today (the range starts at 12:30)
    i_1030 = over["x"].index("2026-03-10 10:00")
    i_0730 = over["x"].index("2026-03-10 07:00")
    assert over["series"]["PRECISE"][i_1030] == 4
    assert over["series"]["HIGHLY_RELEVANT"][i_1030] == 6
    assert over["series"]["REFERENCE"][i_0730] == 5
    assert over["series"]["not found"][i_1030] == 3
    assert sum(sum(v) for v in over["series"].values()) == 20


def test_distribution_over_time_per_day_beyond_two_days(seeded):
    week = InvocationFilter(start=NOW - timedelta(days=7), end=NOW + timedelta(seconds=1))
    over = selectors.distribution_over_time(
        qs=invocations_filtered(filters=week), filters=week, field="dedup_reason"
    )
    assert over["bucket"] == "day" and len(over["x"]) == 8
    assert over["series"]["none"][over["x"].index("2026-03-10")] == 19  # + the row at NOW
    assert over["series"]["none"][over["x"].index("2026-03-07")] == 1
    assert over["series"]["doc_retrieved"][over["x"].index("2026-03-10")] == 1


def test_lookups_per_session(seeded):
    stats = selectors.lookups_per_session(qs=invocations_filtered(filters=DAY))
    # session "a": 4 PRECISE + 2 DEDUPED = 6; b0, b1: 3 each; 9 others with 1 call (ERROR row included).
    assert stats["sessions"] == 12 and stats["calls"] == 21
    assert stats["max"] == 6 and stats["p50"] == 1 and stats["p95"] == 6
    assert stats["histogram"]["sessions"][:6] == [9, 0, 2, 0, 0, 1]
    assert stats["histogram"]["labels"][-1] == "10+"


def test_latency_percentiles_nearest_rank(db):
    for ms in [10] * 50 + [20] * 45 + [300] * 4 + [5000]:
        ToolInvocationFactory(duration_ms=ms, created_at=NOW - timedelta(minutes=5))
    latency = selectors.latency_percentiles(qs=invocations_filtered(filters=DAY))
    assert latency == {"calls": 100, "p50": 10, "p95": 20, "p99": 300, "max": 5000}


def test_status_rates(seeded):
    status = selectors.status_rates(qs=invocations_filtered(filters=DAY))
    assert status["counts"] == {"SUCCESS": 20, "DEGRADED": 0, "ERROR": 1}
    assert status["error_rate"] == round(100 / 21, 2) and status["degraded_rate"] == 0.0


def test_not_found_queries_most_frequent_first(seeded):
    assert selectors.not_found_queries(qs=invocations_filtered(filters=DAY)) == [
        {"query": "不存在的东西", "count": 2},
        {"query": "ERR_UNKNOWN", "count": 1},
    ]


def test_domain_and_tool_filters(seeded):
    ToolInvocationFactory(
        relevance_level="REFERENCE", domains=["api", "infrastructure"], created_at=NOW - timedelta(hours=1)
    )
    api = InvocationFilter(start=DAY.start, end=DAY.end, domain="api")
    assert _counts(selectors.relevance_distribution(qs=invocations_filtered(filters=api)))["REFERENCE"] == (
        1,
        100.0,
    )
    other = InvocationFilter(start=DAY.start, end=DAY.end, tool_name="other_tool")
    assert _counts(selectors.relevance_distribution(qs=invocations_filtered(filters=other)))["PRECISE"] == (
        1,
        100.0,
    )
    everything = InvocationFilter(start=DAY.start, end=DAY.end, tool_name=None)
    assert (
        sum(r["count"] for r in selectors.relevance_distribution(qs=invocations_filtered(filters=everything)))
        == 22
    )


def test_empty_range_gives_zeros_not_errors(db):
    data = selectors.dashboard_data(filters=DAY)
    assert all(row["count"] == 0 and row["percent"] == 0.0 for row in data["relevance"])
    assert data["latency"]["p50"] is None and data["sessions"]["sessions"] == 0
    assert data["not_found"] == []
