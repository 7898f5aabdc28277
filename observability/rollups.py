"""Daily rollups of tool_invocation: what lets a 30-day dashboard stay fast at a million rows.

A dashboard range is split (``rollup_plan``) into whole days that have ended, read from
``tool_invocation_daily`` (a few hundred rows per day), and the partial days at its edges, read
from tool_invocation itself through the covering dashboard index. Ranges of up to two days (bars
per hour) read tool_invocation only: they are small.

A day is rolled up by the worker: hourly (``observability.tasks``), when a dashboard found it
missing (it reads the day raw meanwhile and queues the build: page views never write), or by
``manage.py rollup_invocations``. Invocations are recorded as they happen, so an ended day does
not change; rows imported or deleted afterwards need ``rollup_invocations --rebuild``. Days are
those of TIME_ZONE; a rollup built under another time zone is rebuilt.

Every row keeps the calls' agent, so the dashboard filters and breaks down by agent from the
rollups too. One known difference from counting raw rows: "calls per session" counts a
session's calls per day, so a session that spans midnight counts once on each day.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, time, timedelta

from django.db import IntegrityError, connections, transaction
from django.db.models import Count, F, Q, QuerySet
from django.db.models.functions import Floor
from django.utils import timezone

from config.display import json_value_text
from config.queueing import task_queue_on_commit
from observability.expressions import JSONValueText
from observability.models import InvocationDailyRollup, InvocationRollupDay, ToolInvocation

logger = logging.getLogger(__name__)

SIMILARITY_BINS = 20
# The agent filter's value for calls without an agent (user ids start at 1).
NO_AGENT = 0
# A day is rolled up only this long after it ended: calls still being recorded at midnight
# (a transaction open across it) land first.
GRACE = timedelta(minutes=5)
Kind = InvocationDailyRollup.Kind


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min).replace(tzinfo=timezone.get_current_timezone())


def rollup_plan(*, start: datetime, end: datetime, bucket: str, now: datetime | None = None):
    """Split [start, end) into raw ranges and rolled-up days: ``([(start, end), ...], [day, ...])``."""
    if bucket != "day":
        return [(start, end)], []
    now = now or timezone.now()
    local_start = timezone.localtime(start)
    first = local_start.date() if local_start.time() == time.min else local_start.date() + timedelta(days=1)
    closed_until = min(end, now - GRACE)
    last = timezone.localtime(closed_until).date()  # exclusive: days ending at or before closed_until
    if first >= last:
        return [(start, end)], []
    days = [first + timedelta(days=i) for i in range((last - first).days)]
    raw = []
    if start < day_start(first):
        raw.append((start, day_start(first)))
    if day_start(last) < end:
        raw.append((day_start(last), end))
    return raw, days


def _session_rows(qs: QuerySet, day: date, by_tool: bool, by_domain: bool) -> list[InvocationDailyRollup]:
    # A session is the agent's own (its id is scoped by agent): always grouped by agent.
    dims = [d for d, used in (("tool_name", by_tool), ("primary_domain", by_domain)) if used] + ["agent_id"]
    inner = qs.values(*dims, "session_id").annotate(n=Count("*")).values(*dims, "n").order_by()
    sql, params = inner.query.sql_with_params()
    outer_dims = ", ".join(f"t.{d}" for d in dims)
    group = f"{outer_dims}, t.n"
    with connections[qs.db].cursor() as cursor:
        cursor.execute(f"SELECT {group}, COUNT(*) FROM ({sql}) t GROUP BY {group}", params)
        fetched = cursor.fetchall()
    rows = []
    for values in fetched:
        named = dict(zip([*dims, "n", "sessions"], values, strict=True))
        rows.append(
            InvocationDailyRollup(
                day=day,
                kind=Kind.SESSIONS,
                tool_name=named["tool_name"] if by_tool else InvocationDailyRollup.ALL,
                primary_domain=named["primary_domain"] if by_domain else InvocationDailyRollup.ALL,
                agent_id=named["agent_id"],
                value=int(named["n"]),
                calls=int(named["sessions"]),
            )
        )
    return rows


@transaction.atomic
def invocation_rollup_build(*, day: date) -> int:
    """(Re)build the rollup of one day; returns the invocations it counted.

    Raises IntegrityError when another process builds the same day at the same moment (the
    unique marker row): that build stands.
    """
    InvocationDailyRollup.objects.filter(day=day).delete()
    InvocationRollupDay.objects.filter(day=day).delete()
    marker = InvocationRollupDay.objects.create(day=day, time_zone=timezone.get_current_timezone_name())
    start = day_start(day)
    end = day_start(day + timedelta(days=1))
    qs = ToolInvocation.objects.filter(created_at__gte=start, created_at__lt=end).order_by()

    rows: list[InvocationDailyRollup] = []
    level_rows = (
        qs.annotate(bin=Floor(F("l1_top_similarity") * SIMILARITY_BINS))
        .values("tool_name", "primary_domain", "agent_id", "status", "relevance_level", "dedup_reason", "bin")
        .annotate(n=Count("*"))
    )
    total = 0
    for r in level_rows:
        total += r["n"]
        rows.append(
            InvocationDailyRollup(
                day=day,
                kind=Kind.LEVEL,
                tool_name=r["tool_name"],
                primary_domain=r["primary_domain"],
                agent_id=r["agent_id"],
                status=r["status"],
                relevance_level=r["relevance_level"],
                dedup_reason=r["dedup_reason"],
                similarity_bin=None if r["bin"] is None else int(r["bin"]),
                calls=r["n"],
            )
        )
    for r in qs.values("tool_name", "primary_domain", "agent_id", "duration_ms").annotate(n=Count("*")):
        rows.append(
            InvocationDailyRollup(
                day=day,
                kind=Kind.LATENCY,
                tool_name=r["tool_name"],
                primary_domain=r["primary_domain"],
                agent_id=r["agent_id"],
                value=r["duration_ms"],
                calls=r["n"],
            )
        )
    not_found = (
        qs.exclude(status=ToolInvocation.Status.ERROR)
        .filter(relevance_level__isnull=True)
        .annotate(q=JSONValueText("request", "$.query"))
        .values("tool_name", "primary_domain", "agent_id", "q")
        .annotate(n=Count("*"))
    )
    for r in not_found:
        rows.append(
            InvocationDailyRollup(
                day=day,
                kind=Kind.NOT_FOUND,
                tool_name=r["tool_name"],
                primary_domain=r["primary_domain"],
                agent_id=r["agent_id"],
                query=json_value_text(r["q"]),
                calls=r["n"],
            )
        )
    for by_tool in (True, False):
        for by_domain in (True, False):
            rows += _session_rows(qs, day, by_tool, by_domain)
    InvocationDailyRollup.objects.bulk_create(rows, batch_size=1000)
    marker.invocations = total
    marker.save(update_fields=["invocations"])
    return total


def rollup_days_ready(days: list[date]) -> set[date]:
    """The days among ``days`` rolled up under the current time zone (a read)."""
    if not days:
        return set()
    return set(
        InvocationRollupDay.objects.filter(
            day__in=days, time_zone=timezone.get_current_timezone_name()
        ).values_list("day", flat=True)
    )


def rollups_ensure(days: list[date]) -> set[date]:
    """Build the rollups of ``days`` that are missing (or from another time zone); returns the
    days rolled up. The worker's task and ``rollup_invocations`` call it, never a page view."""
    ready = rollup_days_ready(days)
    # Newest first: the days a viewer looks at most often.
    for day in sorted((d for d in days if d not in ready), reverse=True):
        try:
            invocation_rollup_build(day=day)
        except IntegrityError:
            logger.info("rollup of %s was built by another process meanwhile", day)
        ready.add(day)
    return ready


def rollups_queue(days: list[date]) -> None:
    """Ask the worker to build ``days`` (after the current transaction commits)."""
    task_queue_on_commit(
        "observability.invocation_rollups_build",
        kwargs={"days": [d.isoformat() for d in days]},
        # a broker outage: the hourly run catches up
        on_error=lambda _exc: logger.warning(
            "could not queue the rollup of %d day(s)", len(days), exc_info=True
        ),
    )


def day_ranges(days: list[date]) -> list[tuple[datetime, datetime]]:
    """[start, end) of each run of consecutive days."""
    ranges: list[tuple[datetime, datetime]] = []
    for day in sorted(days):
        start, end = day_start(day), day_start(day + timedelta(days=1))
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))
    return ranges


def agent_q(agent: int | None) -> Q:
    """The agent filter (tool_invocation and rollup rows alike): one agent's id, NO_AGENT for
    calls without one, None for every call."""
    if agent is None:
        return Q()
    if agent == NO_AGENT:
        return Q(agent__isnull=True)
    return Q(agent_id=agent)


def rollup_rows(
    *, kind: str, days: list[date], tool_name: str | None, domain: str | None, agent: int | None = None
) -> QuerySet:
    """Rollup rows of ``kind`` for ``days``, one tool / domain / agent or all of them."""
    qs = InvocationDailyRollup.objects.filter(agent_q(agent), kind=kind, day__in=days).order_by()
    if kind == Kind.SESSIONS:
        # Sessions do not add up across tools or domains: read the rows made for the filter.
        # They do across agents (each session is one agent's).
        return qs.filter(
            tool_name=tool_name or InvocationDailyRollup.ALL,
            primary_domain=domain or InvocationDailyRollup.ALL,
        )
    if tool_name:
        qs = qs.filter(tool_name=tool_name)
    if domain:
        qs = qs.filter(primary_domain=domain)
    return qs
