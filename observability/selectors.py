"""Reads behind the dashboards: how lookups went, over a filtered set of calls.

Every chart is derived from four GROUP BYs ("facts": calls by level / dedup reason / status /
similarity bin and time bucket; by duration; not-found calls by query; sessions by their number
of calls). They are counted in the database, never row by row, through the covering
``tool_inv_dashboard_idx`` (observability.models), and for dashboard ranges of more than two days
the whole ended days come from the daily rollups (observability.rollups), so the pages stay fast
at a million invocations (see ``bench/dashboard.py``). The numbers are computed from the facts
by ``observability.metrics``.

Reads only: a day without its rollup is counted from tool_invocation and its build is queued for
the worker; no page view writes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import date, datetime

from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Case, Count, F, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Floor, TruncDay, TruncHour
from django.utils import timezone

from config.display import json_value_text
from observability import rollups
from observability.expressions import JSONValueText
from observability.metrics import (  # noqa: F401 - re-exported: the pages and tests read them here
    DEDUP_REASONS,
    DIFY,
    DIFY_TOOL,
    LOOKUP_TOOL,
    RELEVANCE_LEVELS,
    SESSION_LOOKUPS_CAP,
    Facts,
    InvocationFilter,
    agents_from_facts,
    dedup_from_facts,
    latency_from_facts,
    latency_over_time_from_facts,
    not_found_from_facts,
    over_time_from_facts,
    relevance_from_facts,
    sessions_from_facts,
    similarity_from_facts,
    status_from_facts,
)
from observability.models import InvocationDailyRollup, ToolInvocation
from observability.rollups import SIMILARITY_BINS


def invocations_filtered(*, filters: InvocationFilter) -> QuerySet[ToolInvocation]:
    qs = ToolInvocation.objects.filter(
        rollups.agent_q(filters.agent), created_at__gte=filters.start, created_at__lt=filters.end
    )
    if filters.tool_name:
        qs = qs.filter(tool_name=filters.tool_name)
    return _narrowed(qs, filters).order_by()  # no ORDER BY: it would defeat the GROUP BY plans


def _narrowed(qs: QuerySet, filters: InvocationFilter) -> QuerySet:
    """The domain / level / dedup / status filters, on tool_invocation or on the rollup's rows
    (same column names)."""
    if filters.domain:
        qs = qs.filter(primary_domain=filters.domain)
    if filters.level:
        qs = qs.filter(level_filter_q(filters.level))
    if filters.dedup:
        qs = (
            qs.filter(dedup_reason__isnull=True)
            if filters.dedup == "none"
            else qs.filter(dedup_reason=filters.dedup)
        )
    if filters.status:
        qs = qs.filter(status=filters.status)
    return qs


def _answered(qs: QuerySet[ToolInvocation]) -> QuerySet[ToolInvocation]:
    """Calls that ran to an answer (found or not): everything but ERROR."""
    return qs.exclude(status=ToolInvocation.Status.ERROR)


# --- facts: the few GROUP BYs every chart is derived from -------------------------------------
#
# Counted from tool_invocation (any queryset) or read from the daily rollups, then added up: the
# charts are computed from the sum, so both sources give the same numbers by construction.


def _trunc(bucket: str | None):
    if bucket is None:
        return None
    trunc = TruncHour if bucket == "hour" else TruncDay
    return trunc("created_at", tzinfo=timezone.get_current_timezone())


def _level_facts(qs: QuerySet[ToolInvocation], *, bucket: str | None = None) -> Counter:
    """Calls by (bucket, level, dedup reason, status, similarity bin)."""
    qs = qs.annotate(bin=Floor(F("l1_top_similarity") * SIMILARITY_BINS))
    dims = ["relevance_level", "dedup_reason", "status", "bin"]
    counts: Counter = Counter()
    # Dify calls have no relevance level by design: they count as their own outcome (metrics.DIFY)
    # in the status rates, never as "not found".
    qs = qs.annotate(level=Case(When(tool_name=DIFY_TOOL, then=Value(DIFY)), default=F("relevance_level")))
    dims[0] = "level"
    if bucket is not None:
        qs = qs.annotate(t=_trunc(bucket))
        dims = ["t", *dims]
    for row in qs.values(*dims).annotate(n=Count("*")).order_by():
        t = row.get("t")
        if t is not None and timezone.is_aware(t):
            t = timezone.localtime(t)
        b = None if row["bin"] is None else int(row["bin"])
        counts[(t, row["level"], row["dedup_reason"], row["status"], b)] += row["n"]
    return counts


def _agent_facts(qs: QuerySet[ToolInvocation]) -> Counter:
    """Calls by (agent, level, dedup reason, status): a GROUP BY of its own, without the time
    and similarity dimensions, so the agent does not multiply the level facts' groups."""
    qs = qs.annotate(level=Case(When(tool_name=DIFY_TOOL, then=Value(DIFY)), default=F("relevance_level")))
    counts: Counter = Counter()
    for row in qs.values("agent_id", "level", "dedup_reason", "status").annotate(n=Count("*")).order_by():
        counts[(row["agent_id"], row["level"], row["dedup_reason"], row["status"])] += row["n"]
    return counts


def _duration_facts(
    qs: QuerySet[ToolInvocation], *, bucket: str | None = None
) -> tuple[Counter, Counter, Counter]:
    """Calls by duration_ms, by (bucket start, duration_ms) when ``bucket`` is given, and by
    (agent, duration_ms): one GROUP BY for the three."""
    durations: Counter = Counter()
    over_time: Counter = Counter()
    by_agent: Counter = Counter()
    dims = ["agent_id", "duration_ms"]
    if bucket is not None:
        qs = qs.annotate(t=_trunc(bucket))
        dims = ["t", *dims]
    for row in qs.values(*dims).annotate(n=Count("*")).order_by():
        durations[row["duration_ms"]] += row["n"]
        by_agent[(row["agent_id"], row["duration_ms"])] += row["n"]
        t = row.get("t")
        if t is not None:
            if timezone.is_aware(t):
                t = timezone.localtime(t)
            over_time[(t, row["duration_ms"])] += row["n"]
    return durations, over_time, by_agent


def _not_found_facts(qs: QuerySet[ToolInvocation]) -> Counter:
    rows = (
        _answered(qs)
        .filter(relevance_level__isnull=True)
        .exclude(tool_name=DIFY_TOOL)
        .annotate(query=JSONValueText("request", "$.query"))
        .values("query")
        .annotate(n=Count("*"))
        .order_by()
    )
    counts: Counter = Counter()
    for row in rows:
        counts[json_value_text(row["query"])] += row["n"]
    return counts


def _session_facts(qs: QuerySet[ToolInvocation]) -> Counter:
    # A session is its agent's own: two agents' "conv-42" are two sessions.
    inner = qs.values("agent_id", "session_id").annotate(n=Count("*")).values("n").order_by()
    sql, params = inner.query.sql_with_params()
    with connections[qs.db].cursor() as cursor:
        cursor.execute(f"SELECT t.n, COUNT(*) FROM ({sql}) t GROUP BY t.n", params)
        return Counter({int(n): int(sessions) for n, sessions in cursor.fetchall()})


def _raw_facts(qs: QuerySet[ToolInvocation], *, bucket: str | None) -> Facts:
    durations, durations_over_time, agent_durations = _duration_facts(qs, bucket=bucket)
    return Facts(
        levels=_level_facts(qs, bucket=bucket),
        durations=durations,
        not_found=_not_found_facts(qs),
        sessions=_session_facts(qs),
        agents=_agent_facts(qs),
        durations_over_time=durations_over_time,
        agent_durations=agent_durations,
    )


def _rollup_facts(*, days: list[date], filters: InvocationFilter, levels_only: bool = False) -> Facts:
    def rows(kind: str) -> QuerySet:
        return rollups.rollup_rows(
            kind=kind, days=days, tool_name=filters.tool_name, domain=filters.domain, agent=filters.agent
        )

    facts = Facts()
    Kind = InvocationDailyRollup.Kind
    level_rows = _narrowed(rows(Kind.LEVEL), replace(filters, domain=None))
    for r in level_rows.values(
        "day", "tool_name", "relevance_level", "dedup_reason", "status", "similarity_bin"
    ).annotate(n=Sum("calls")):
        t = rollups.day_start(r["day"])
        level = DIFY if r["tool_name"] == DIFY_TOOL else r["relevance_level"]
        facts.levels[(t, level, r["dedup_reason"], r["status"], r["similarity_bin"])] += r["n"]
    if levels_only:
        return facts
    # The agent breakdown: its own GROUP BY, without the day and similarity dimensions.
    for r in level_rows.values("agent_id", "tool_name", "relevance_level", "dedup_reason", "status").annotate(
        n=Sum("calls")
    ):
        level = DIFY if r["tool_name"] == DIFY_TOOL else r["relevance_level"]
        facts.agents[(r["agent_id"], level, r["dedup_reason"], r["status"])] += r["n"]
    for r in rows(Kind.LATENCY).values("day", "agent_id", "value").annotate(n=Sum("calls")):
        facts.durations[r["value"]] += r["n"]
        facts.durations_over_time[(rollups.day_start(r["day"]), r["value"])] += r["n"]
        facts.agent_durations[(r["agent_id"], r["value"])] += r["n"]
    for r in rows(Kind.NOT_FOUND).exclude(tool_name=DIFY_TOOL).values("query").annotate(n=Sum("calls")):
        facts.not_found[r["query"]] += r["n"]
    for r in rows(Kind.SESSIONS).values("value").annotate(n=Sum("calls")):
        facts.sessions[r["value"]] += r["n"]
    return facts


def invocation_facts(
    *,
    filters: InvocationFilter,
    use_rollups: bool = True,
    levels_only: bool = False,
    now: datetime | None = None,
) -> Facts:
    """The facts of a range: ended whole days from the daily rollups, the rest from
    tool_invocation. A day not rolled up yet is read raw and its build queued: a view never
    writes. ``use_rollups=False`` counts everything from
    tool_invocation (the benchmark and the tests compare both); ``levels_only`` skips the
    latency, not-found and session facts (the invocation list charts only levels)."""
    # Latency, not-found and session rollups have no level dimensions: with a level, dedup or
    # status filter only the level facts can come from rollups.
    if use_rollups and (levels_only or not (filters.level or filters.dedup or filters.status)):
        raw_ranges, days = rollups.rollup_plan(
            start=filters.start, end=filters.end, bucket=filters.bucket, now=now
        )
    else:
        raw_ranges, days = [(filters.start, filters.end)], []
    if days:
        ready = rollups.rollup_days_ready(days)
        missing = [d for d in days if d not in ready]
        if missing:  # counted raw now; the worker builds them for the next view
            rollups.rollups_queue(missing)
            raw_ranges += rollups.day_ranges(missing)
        days = [d for d in days if d in ready]
    facts = Facts()
    for start, end in raw_ranges:
        qs = invocations_filtered(filters=replace(filters, start=start, end=end))
        if levels_only:
            facts.add(Facts(levels=_level_facts(qs, bucket=filters.bucket)))
        else:
            facts.add(_raw_facts(qs, bucket=filters.bucket))
    if days:
        facts.add(_rollup_facts(days=days, filters=filters, levels_only=levels_only))
    return facts


# --- the same numbers for any queryset (the invocation list's charts, tests) -------------------


def level_and_dedup_distributions(*, qs: QuerySet[ToolInvocation]) -> tuple[list[dict], list[dict]]:
    """Both distributions from one GROUP BY (the invocation list's charts)."""
    facts = Facts(levels=_level_facts(qs))
    return relevance_from_facts(facts), dedup_from_facts(facts)


def relevance_distribution(*, qs: QuerySet[ToolInvocation]) -> list[dict]:
    """Count and percentage of each relevance level (and "not found"), ERROR calls left out."""
    return relevance_from_facts(Facts(levels=_level_facts(qs)))


def dedup_distribution(*, qs: QuerySet[ToolInvocation]) -> list[dict]:
    """Count and percentage of each dedup reason ("none" = nothing withheld), ERROR calls left out."""
    return dedup_from_facts(Facts(levels=_level_facts(qs)))


def similarity_histogram(*, qs: QuerySet[ToolInvocation]) -> dict:
    """Calls by l1_top_similarity in 0.05-wide bins, split by relevance level:
    ``{"bins": [{"lo", "hi"}...], "levels": {label: [count per bin]}, "total": n}``."""
    return similarity_from_facts(Facts(levels=_level_facts(qs)))


def distribution_over_time(*, qs: QuerySet[ToolInvocation], filters: InvocationFilter, field: str) -> dict:
    """Counts of ``field`` (relevance_level or dedup_reason) per hour or day, for stacked bars:
    ``{"bucket", "x": [bucket starts], "series": {label: [counts]}}``, empty buckets as zeros."""
    return over_time_from_facts(
        Facts(levels=_level_facts(qs, bucket=filters.bucket)), filters=filters, field_name=field
    )


def lookups_per_session(*, qs: QuerySet[ToolInvocation]) -> dict:
    """How many calls each session made: the symptom the seeds set out to cure (an executor
    calling lookup_knowledge 20+ times in one conversation). Sessions, calls, mean, p50, p95,
    max and a histogram (1 .. SESSION_LOOKUPS_CAP-1, then "SESSION_LOOKUPS_CAP+")."""
    return sessions_from_facts(Facts(sessions=_session_facts(qs)))


def latency_percentiles(*, qs: QuerySet[ToolInvocation]) -> dict:
    """p50 / p95 / p99 / max of duration_ms (nearest rank), from one GROUP BY."""
    return latency_from_facts(Facts(durations=_duration_facts(qs)[0]))


def status_rates(*, qs: QuerySet[ToolInvocation]) -> dict:
    """Calls per status and the error and degraded rates (percent of all calls)."""
    return status_from_facts(Facts(levels=_level_facts(qs)))


def not_found_queries(*, qs: QuerySet[ToolInvocation], limit: int = 10) -> list[dict]:
    """The most frequent queries that ended not found, most frequent first (ties: alphabetical)."""
    return not_found_from_facts(Facts(not_found=_not_found_facts(qs)), limit=limit)


def tool_names() -> list[str]:
    """Tool names that have calls (the dashboard's tool filter)."""
    return list(ToolInvocation.objects.order_by("tool_name").values_list("tool_name", flat=True).distinct())


def agents_with_calls() -> list[tuple[int, str]]:
    """(id, username) of the agents that have calls, by name (the dashboard's agent filter)."""
    ids = ToolInvocation.objects.filter(agent__isnull=False).order_by().values("agent_id").distinct()
    return list(
        get_user_model().objects.filter(pk__in=ids).order_by("username").values_list("pk", "username")
    )


def agent_names(ids) -> dict[int, str]:
    """Usernames of the given agent ids (a deleted agent has none: its calls show NO_AGENT)."""
    ids = [i for i in ids if i]
    if not ids:
        return {}
    return dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))


def agent_breakdown(facts: Facts) -> list[dict]:
    """The per-agent rows of ``metrics.agents_from_facts`` with each agent's username."""
    rows = agents_from_facts(facts)
    names = agent_names(r["agent"] for r in rows)
    for row in rows:
        row["name"] = names.get(row["agent"], "")
    return rows


def dashboard_data(*, filters: InvocationFilter, use_rollups: bool = True) -> dict:
    """Everything the dashboard page draws, for one set of filters."""
    facts = invocation_facts(filters=filters, use_rollups=use_rollups)
    return {
        "relevance": relevance_from_facts(facts),
        "dedup": dedup_from_facts(facts),
        "similarity": similarity_from_facts(facts),
        "relevance_over_time": over_time_from_facts(facts, filters=filters, field_name="relevance_level"),
        "dedup_over_time": over_time_from_facts(facts, filters=filters, field_name="dedup_reason"),
        "sessions": sessions_from_facts(facts),
        "latency": latency_from_facts(facts),
        "status": status_from_facts(facts),
        "not_found": not_found_from_facts(facts),
        "latency_over_time": latency_over_time_from_facts(facts, filters=filters),
        "agents": agent_breakdown(facts),
        "dify": dify_outcomes(filters=filters),
    }


def level_filter_q(value: str) -> Q:
    """The changelist's level filter: a level name, or "none" for not found."""
    if value == "none":
        return Q(relevance_level__isnull=True) & ~Q(status=ToolInvocation.Status.ERROR)
    return Q(relevance_level=value)


def dify_outcomes(*, filters: InvocationFilter) -> dict:
    """Dify calls of the range by outcome: records returned, none returned, error. Dify asks for
    records above its own score threshold; there is no relevance level to tell."""
    if filters.tool_name not in (None, DIFY_TOOL):
        return {"calls": 0, "records": 0, "none": 0, "errors": 0}
    qs = invocations_filtered(filters=replace(filters, tool_name=DIFY_TOOL))
    rows = (
        qs.annotate(
            outcome=Case(
                When(status=ToolInvocation.Status.ERROR, then=Value("errors")),
                When(retrieval_details__returned_doc_keys__0__isnull=False, then=Value("records")),
                default=Value("none"),
            )
        )
        .values("outcome")
        .annotate(n=Count("*"))
        .order_by()
    )
    counts = {"records": 0, "none": 0, "errors": 0}
    for row in rows:
        counts[row["outcome"]] += row["n"]
    return {"calls": sum(counts.values()), **counts}
