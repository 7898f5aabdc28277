"""Daily rollups: a dashboard range reads ended days from them and gives exactly the numbers of
counting tool_invocation itself."""

from datetime import UTC, date, datetime, timedelta
from unittest import mock

import pytest
from django.core.management import call_command
from django.utils import timezone

from observability import rollups, selectors
from observability.models import InvocationDailyRollup, InvocationRollupDay, ToolInvocation
from observability.selectors import InvocationFilter
from tests.observability.factories import ToolInvocationFactory

NOW = datetime(2026, 3, 10, 12, 30, tzinfo=UTC)


def test_plan_splits_a_week_into_edges_and_ended_days():
    raw, days = rollups.rollup_plan(start=NOW - timedelta(days=7), end=NOW, bucket="day", now=NOW)
    assert days == [date(2026, 3, d) for d in range(4, 10)]  # 4th .. 9th: whole and ended
    assert raw == [
        (NOW - timedelta(days=7), datetime(2026, 3, 4, tzinfo=UTC)),
        (datetime(2026, 3, 10, tzinfo=UTC), NOW),
    ]


def test_plan_reads_short_ranges_and_unended_days_raw():
    day = (NOW - timedelta(days=1), NOW)
    assert rollups.rollup_plan(start=day[0], end=day[1], bucket="hour", now=NOW) == ([day], [])
    just_after_midnight = datetime(2026, 3, 10, 0, 2, tzinfo=UTC)
    raw, days = rollups.rollup_plan(
        start=datetime(2026, 3, 7, tzinfo=UTC), end=just_after_midnight, bucket="day", now=just_after_midnight
    )
    # The 9th ended two minutes ago, within the grace period: still read raw.
    assert days == [date(2026, 3, 7), date(2026, 3, 8)]
    assert raw == [(datetime(2026, 3, 9, tzinfo=UTC), just_after_midnight)]


@pytest.fixture
def week(db, django_user_model):
    """Calls over eight days, sessions within a day, two tools, two domains, errors, not found,
    two agents and calls without one (the agents reuse each other's session ids)."""
    levels = ["PRECISE", "HIGHLY_RELEVANT", "REFERENCE", "DEDUPED", None]
    agents = [
        django_user_model.objects.create(username="alpha"),
        django_user_model.objects.create(username="<b>beta</b>" + "\u0301" * 40),
        None,
    ]
    n = 0
    for day in range(8):
        for i in range(9 + day):
            n += 1
            level = levels[(i + day) % 5]
            ToolInvocationFactory(
                created_at=NOW - timedelta(days=day, hours=(i % 10)),
                relevance_level=level,
                dedup_reason=("doc_retrieved" if i % 2 else "domain_retrieved")
                if level == "DEDUPED"
                else None,
                similarity=None if i % 7 == 0 else round(0.3 + 0.07 * (i % 10), 2),
                domains=["api"] if i % 3 == 0 else ["infrastructure", "api"],
                session_id=f"d{day}-s{i % 4}",
                status=ToolInvocation.Status.ERROR if i % 11 == 10 else ToolInvocation.Status.SUCCESS,
                query=f"查询 {i % 3}",
                duration_ms=5 + (i * 13) % 40,
                tool_name="lookup_knowledge" if i % 6 else "other_tool",
                agent=agents[(i // 2) % 3],
            )


def _agent_id(name: str | None) -> int | None:
    from django.contrib.auth import get_user_model

    if name is None:
        return None
    if name == "no agent":
        return rollups.NO_AGENT
    return get_user_model().objects.get(username=name).pk


@pytest.mark.parametrize(
    ("tool_name", "domain", "agent"),
    [
        ("lookup_knowledge", None, None),
        ("lookup_knowledge", "api", None),
        (None, None, None),
        (None, "api", None),
        ("lookup_knowledge", None, "alpha"),
        (None, "api", "alpha"),
        (None, None, "no agent"),
    ],
)
def test_rolled_up_dashboard_equals_counting_raw_rows(
    week, tool_name, domain, agent, django_capture_on_commit_callbacks
):
    filters = InvocationFilter(
        start=NOW - timedelta(days=7), end=NOW, tool_name=tool_name, domain=domain, agent=_agent_id(agent)
    )
    raw = selectors.dashboard_data(filters=filters, use_rollups=False)
    assert raw["status"]["calls"] > 0
    with (
        mock.patch("django.utils.timezone.now", return_value=NOW),
        django_capture_on_commit_callbacks(execute=True) as queued,
    ):
        # The first view reads the six missing days raw (a view never writes) and queues their
        # build (run here by the eager worker).
        first = selectors.dashboard_data(filters=filters)
    assert len(queued) == 1
    assert first == raw
    assert InvocationRollupDay.objects.count() == 6
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        assert selectors.dashboard_data(filters=filters) == raw


def test_days_are_built_once_and_rebuilt_for_another_time_zone(week, settings):
    days = [date(2026, 3, 8), date(2026, 3, 9)]
    assert rollups.rollups_ensure(days) == set(days)
    rows = InvocationDailyRollup.objects.count()
    markers = sorted(InvocationRollupDay.objects.values_list("pk", flat=True))
    assert rollups.rollups_ensure(days) == set(days) and InvocationDailyRollup.objects.count() == rows
    assert sorted(InvocationRollupDay.objects.values_list("pk", flat=True)) == markers  # not rebuilt
    settings.TIME_ZONE = "Asia/Shanghai"
    with timezone.override("Asia/Shanghai"):
        assert rollups.rollups_ensure(days) == set(days)
    assert set(InvocationRollupDay.objects.values_list("time_zone", flat=True)) == {"Asia/Shanghai"}


def test_rebuild_picks_up_rows_imported_later(week):
    day = date(2026, 3, 9)
    rollups.rollups_ensure([day])
    before = InvocationRollupDay.objects.get(day=day).invocations
    ToolInvocationFactory(created_at=datetime(2026, 3, 9, 8, tzinfo=UTC))
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        call_command("rollup_invocations", "--days", "1", "--rebuild", stdout=mock.MagicMock())
    assert InvocationRollupDay.objects.get(day=day).invocations == before + 1


def test_command_backfills_missing_days(week):
    out = mock.MagicMock()
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        call_command("rollup_invocations", "--days", "3", stdout=out)
    assert sorted(InvocationRollupDay.objects.values_list("day", flat=True)) == [
        date(2026, 3, 7),
        date(2026, 3, 8),
        date(2026, 3, 9),
    ]
    assert "rolled up 3 day(s) of 3" in out.write.call_args[0][0]


def test_periodic_task_rolls_up_the_last_ended_days(week):
    from django.conf import settings

    from observability.tasks import invocation_rollups_build

    assert settings.CELERY_BEAT_SCHEDULE["observability-invocation-rollups"]["task"] == (
        "observability.invocation_rollups_build"
    )
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        assert invocation_rollups_build.delay().get() == 3
        built = sorted(InvocationRollupDay.objects.values_list("pk", flat=True))
        assert invocation_rollups_build.delay().get() == 3
        # Already done: nothing rebuilt (a rebuild replaces the day's marker row).
        assert sorted(InvocationRollupDay.objects.values_list("pk", flat=True)) == built
    assert sorted(InvocationRollupDay.objects.values_list("day", flat=True)) == [
        date(2026, 3, 7),
        date(2026, 3, 8),
        date(2026, 3, 9),
    ]


def test_a_dashboard_view_writes_nothing(week, django_capture_on_commit_callbacks):
    filters = InvocationFilter(start=NOW - timedelta(days=7), end=NOW)
    raw = selectors.dashboard_data(filters=filters, use_rollups=False)
    with (
        mock.patch("django.utils.timezone.now", return_value=NOW),
        django_capture_on_commit_callbacks(execute=False) as queued,
    ):
        assert selectors.dashboard_data(filters=filters) == raw
    # The missing days were read raw and their build queued, not built by the view.
    assert len(queued) == 1
    assert InvocationRollupDay.objects.count() == 0 and InvocationDailyRollup.objects.count() == 0


def _week_rows(filters: InvocationFilter) -> list[ToolInvocation]:
    return list(selectors.invocations_filtered(filters=filters))


def test_the_agent_breakdown_counts_each_agents_calls(week):
    filters = InvocationFilter(start=NOW - timedelta(days=7), end=NOW, tool_name=None)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        rollups.rollups_ensure([date(2026, 3, d) for d in range(4, 10)])
        data = selectors.dashboard_data(filters=filters)
    assert data == selectors.dashboard_data(filters=filters, use_rollups=False)
    expected = {}
    for row in _week_rows(filters):
        key = row.agent_id or rollups.NO_AGENT
        e = expected.setdefault(key, {"calls": 0, "errors": 0, "answered": 0, "not_found": 0, "doc": 0})
        e["calls"] += 1
        if row.status == ToolInvocation.Status.ERROR:
            e["errors"] += 1
            continue
        e["answered"] += 1
        e["not_found"] += row.relevance_level is None
        e["doc"] += row.dedup_reason == "doc_retrieved"
    got = {
        r["agent"]: {
            "calls": r["calls"],
            "errors": r["errors"],
            "answered": r["answered"],
            "not_found": r["levels"]["not found"],
            "doc": r["dedup"]["doc_retrieved"],
        }
        for r in data["agents"]
    }
    assert got == expected and len(got) == 3
    by_agent = {r["agent"]: r for r in data["agents"]}
    for key, e in expected.items():
        assert by_agent[key]["not_found_rate"] == round(100.0 * e["not_found"] / e["answered"], 1)
    names = {r["name"] for r in data["agents"]}
    assert names == {"alpha", "<b>beta</b>" + "\u0301" * 40, ""}
    # Most calls first.
    assert [r["calls"] for r in data["agents"]] == sorted((r["calls"] for r in data["agents"]), reverse=True)


def test_two_agents_sessions_of_the_same_id_are_two_sessions(week):
    filters = InvocationFilter(start=NOW - timedelta(days=7), end=NOW, tool_name=None)
    rows = _week_rows(filters)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        rollups.rollups_ensure([date(2026, 3, d) for d in range(4, 10)])
        sessions = selectors.dashboard_data(filters=filters)["sessions"]
    # Per day (rollups count a session per day) and per agent: the fixture's session ids repeat
    # across agents, so counting by id alone would give fewer.
    per_day_agent = {(timezone.localtime(r.created_at).date(), r.agent_id, r.session_id) for r in rows}
    per_day_id = {(timezone.localtime(r.created_at).date(), r.session_id) for r in rows}
    assert sessions["sessions"] == len(per_day_agent) > len(per_day_id)


def _nearest_rank(values: list[int], q: int) -> int:
    import math

    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@pytest.mark.parametrize("agent", [None, "alpha"])
def test_latency_over_time_is_p50_and_p95_of_each_day(week, agent):
    filters = InvocationFilter(start=NOW - timedelta(days=7), end=NOW, agent=_agent_id(agent))
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        rollups.rollups_ensure([date(2026, 3, d) for d in range(4, 10)])
        over_time = selectors.dashboard_data(filters=filters)["latency_over_time"]
    assert over_time == selectors.dashboard_data(filters=filters, use_rollups=False)["latency_over_time"]
    by_day: dict[str, list[int]] = {}
    for row in _week_rows(filters):
        by_day.setdefault(timezone.localtime(row.created_at).strftime("%Y-%m-%d"), []).append(row.duration_ms)
    assert over_time["bucket"] == "day" and len(over_time["x"]) == 8
    for i, x in enumerate(over_time["x"]):
        values = by_day.get(x, [])
        assert over_time["calls"][i] == len(values)
        assert over_time["p50"][i] == (_nearest_rank(values, 50) if values else None)
        assert over_time["p95"][i] == (_nearest_rank(values, 95) if values else None)


def test_latency_per_hour_for_short_ranges(db):
    start = NOW - timedelta(hours=3)
    for minutes, ms in [(5, 10), (10, 30), (20, 50), (70, 7)]:
        ToolInvocationFactory(created_at=start + timedelta(minutes=minutes), duration_ms=ms)
    over_time = selectors.dashboard_data(filters=InvocationFilter(start=start, end=NOW))["latency_over_time"]
    assert over_time["bucket"] == "hour"
    assert over_time["calls"][:3] == [3, 1, 0]
    assert over_time["p50"][:3] == [30, 7, None] and over_time["p95"][:3] == [50, 7, None]


def test_deleting_an_agent_keeps_rolled_up_days_equal_to_the_rows(week, django_user_model):
    filters = InvocationFilter(start=NOW - timedelta(days=7), end=NOW, tool_name=None)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        rollups.rollups_ensure([date(2026, 3, d) for d in range(4, 10)])
        django_user_model.objects.get(username="alpha").delete()  # its calls keep NULL as agent
        rolled = selectors.dashboard_data(filters=filters)
        raw = selectors.dashboard_data(filters=filters, use_rollups=False)
    assert not InvocationDailyRollup.objects.filter(agent__username="alpha").exists()
    # Its calls now count as calls without an agent, in both. Its sessions stay its own in the
    # rolled-up days, while counting rows again merges them with same-id sessions of no agent.
    assert {k: v for k, v in rolled.items() if k != "sessions"} == {
        k: v for k, v in raw.items() if k != "sessions"
    }
    assert rolled["sessions"]["calls"] == raw["sessions"]["calls"]
    assert rolled["sessions"]["sessions"] > raw["sessions"]["sessions"]


def test_a_rebuild_is_idempotent(week):
    day = date(2026, 3, 8)
    fields = ("kind", "tool_name", "primary_domain", "agent_id", "status", "relevance_level", "dedup_reason")
    fields += ("similarity_bin", "value", "query", "calls")

    def snapshot():
        return sorted(InvocationDailyRollup.objects.filter(day=day).values_list(*fields), key=str)

    rollups.invocation_rollup_build(day=day)
    first = snapshot()
    rollups.invocation_rollup_build(day=day)
    assert snapshot() == first and InvocationRollupDay.objects.filter(day=day).count() == 1
    assert {agent for _, _, _, agent, *_ in first} >= {None}
    assert len({agent for _, _, _, agent, *_ in first}) == 3


@pytest.mark.parametrize("agent", ["alpha", "no agent"])
def test_the_invocation_lists_charts_for_one_agent_read_rollups_and_equal_the_rows(week, admin_client, agent):
    from django.urls import reverse

    from observability.links import agent_params

    with mock.patch("django.utils.timezone.now", return_value=NOW):
        rollups.rollups_ensure([date(2026, 3, d) for d in range(4, 10)])
    start, end = NOW - timedelta(days=7), NOW
    params = {
        "from": start.isoformat(),
        "to": end.isoformat(),
        "tool_name": "lookup_knowledge",
        **agent_params(_agent_id(agent)),
    }
    with (
        mock.patch("django.utils.timezone.now", return_value=NOW),
        # The rollup path only: counting the listed rows would fail.
        mock.patch.object(selectors, "level_and_dedup_distributions", side_effect=AssertionError),
    ):
        response = admin_client.get(reverse("admin:observability_toolinvocation_changelist"), params)
    assert response.status_code == 200
    drawn = dict(
        zip(*(response.context["figures"]["chart-relevance"]["data"][0][k] for k in ("x", "y")), strict=True)
    )
    rows = selectors.invocations_filtered(
        filters=InvocationFilter(start=start, end=end, agent=_agent_id(agent))
    ).exclude(status=ToolInvocation.Status.ERROR)
    expected = {
        label: rows.filter(relevance_level=value).count()
        if value
        else rows.filter(relevance_level=None).count()
        for value, label in selectors.RELEVANCE_LEVELS
    }
    assert drawn == expected and sum(drawn.values()) > 0
