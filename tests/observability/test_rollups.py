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
def week(db):
    """Calls over eight days, sessions within a day, two tools, two domains, errors, not found."""
    levels = ["PRECISE", "HIGHLY_RELEVANT", "REFERENCE", "DEDUPED", None]
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
            )


@pytest.mark.parametrize(
    ("tool_name", "domain"),
    [("lookup_knowledge", None), ("lookup_knowledge", "api"), (None, None), (None, "api")],
)
def test_rolled_up_dashboard_equals_counting_raw_rows(
    week, tool_name, domain, django_capture_on_commit_callbacks
):
    filters = InvocationFilter(start=NOW - timedelta(days=7), end=NOW, tool_name=tool_name, domain=domain)
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
