"""Reads behind the dashboards: distributions of how lookups went, over a filtered set of calls.

Every function takes the queryset ``invocations_filtered`` returns (a time range, optionally one
tool and one domain) and aggregates it in the database with GROUP BY: nothing here loads rows one
by one, so the pages stay fast at a million invocations (see ``bench/dashboard.py``). The GROUP BY
columns are all in ``tool_inv_dashboard_idx`` (observability.models), so MariaDB answers from that
index without reading the table.

"Not found" is a lookup that ran (status SUCCESS or DEGRADED) and recorded no relevance level.
ERROR rows have no level either; they count in ``status_rates`` and nowhere else.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections
from django.db.models import Count, F, Q, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Floor, TruncDay, TruncHour
from django.utils import timezone

from observability.models import ToolInvocation

LOOKUP_TOOL = "lookup_knowledge"

# (value stored in relevance_level, label); None is "not found".
RELEVANCE_LEVELS: list[tuple[str | None, str]] = [
    ("PRECISE", "PRECISE"),
    ("HIGHLY_RELEVANT", "HIGHLY_RELEVANT"),
    ("REFERENCE", "REFERENCE"),
    ("DEDUPED", "DEDUPED"),
    (None, "not found"),
]
DEDUP_REASONS: list[tuple[str | None, str]] = [
    ("doc_retrieved", "doc_retrieved"),
    ("domain_retrieved", "domain_retrieved"),
    (None, "none"),
]
# Similarity histogram bins: 20 bins of 0.05 over [0, 1].
SIMILARITY_BINS = 20
# Lookups-per-session histogram: 1, 2, ... up to this, then "this or more" in one bar.
SESSION_LOOKUPS_CAP = 10


@dataclass(frozen=True)
class InvocationFilter:
    """What the dashboard shows: calls in [start, end), optionally of one tool and one domain."""

    start: datetime
    end: datetime
    tool_name: str | None = LOOKUP_TOOL
    domain: str | None = None

    @property
    def bucket(self) -> str:
        """Bars per hour up to two days, per day beyond."""
        return "hour" if self.end - self.start <= timedelta(days=2) else "day"


def invocations_filtered(*, filters: InvocationFilter) -> QuerySet[ToolInvocation]:
    qs = ToolInvocation.objects.filter(created_at__gte=filters.start, created_at__lt=filters.end)
    if filters.tool_name:
        qs = qs.filter(tool_name=filters.tool_name)
    if filters.domain:
        qs = qs.filter(primary_domain=filters.domain)
    # No ORDER BY: the model's default ordering would defeat the GROUP BY plans.
    return qs.order_by()


def _answered(qs: QuerySet[ToolInvocation]) -> QuerySet[ToolInvocation]:
    """Calls that ran to an answer (found or not): everything but ERROR."""
    return qs.exclude(status=ToolInvocation.Status.ERROR)


def _distribution(qs: QuerySet, field: str, order: list[tuple[str | None, str]]) -> list[dict]:
    counts = {row[field]: row["n"] for row in qs.values(field).annotate(n=Count("*")).order_by()}
    known = [value for value, _ in order]
    total = sum(counts.values())
    rows = [{"value": value, "label": label, "count": counts.pop(value, 0)} for value, label in order]
    # Values the code does not know yet (a level added later) still show, after the known ones.
    rows += [
        {"value": value, "label": str(value), "count": n}
        for value, n in sorted(counts.items(), key=lambda kv: str(kv[0]))
        if value not in known
    ]
    for row in rows:
        row["percent"] = round(100.0 * row["count"] / total, 1) if total else 0.0
    return rows


def relevance_distribution(*, qs: QuerySet[ToolInvocation]) -> list[dict]:
    """Count and percentage of each relevance level (and "not found"), ERROR calls left out."""
    return _distribution(_answered(qs), "relevance_level", RELEVANCE_LEVELS)


def dedup_distribution(*, qs: QuerySet[ToolInvocation]) -> list[dict]:
    """Count and percentage of each dedup reason ("none" = nothing withheld), ERROR calls left out."""
    return _distribution(_answered(qs), "dedup_reason", DEDUP_REASONS)


def similarity_histogram(*, qs: QuerySet[ToolInvocation]) -> dict:
    """Calls by l1_top_similarity in 0.05-wide bins, split by relevance level.

    Returns ``{"bins": [{"lo", "hi"}...], "levels": {label: [count per bin]}, "total": n}``.
    A similarity of exactly 1.0 falls into the last bin.
    """
    rows = (
        _answered(qs)
        .filter(l1_top_similarity__isnull=False)
        .annotate(bin=Floor(F("l1_top_similarity") * SIMILARITY_BINS))
        .values("bin", "relevance_level")
        .annotate(n=Count("*"))
        .order_by()
    )
    labels = dict(RELEVANCE_LEVELS)
    levels: dict[str, list[int]] = {label: [0] * SIMILARITY_BINS for _, label in RELEVANCE_LEVELS}
    total = 0
    for row in rows:
        index = min(max(int(row["bin"]), 0), SIMILARITY_BINS - 1)
        label = labels.get(row["relevance_level"], str(row["relevance_level"]))
        levels.setdefault(label, [0] * SIMILARITY_BINS)[index] += row["n"]
        total += row["n"]
    bins = [
        {"lo": round(i / SIMILARITY_BINS, 4), "hi": round((i + 1) / SIMILARITY_BINS, 4)}
        for i in range(SIMILARITY_BINS)
    ]
    return {"bins": bins, "levels": levels, "total": total}


def _bucket_starts(filters: InvocationFilter) -> list[datetime]:
    tz = timezone.get_current_timezone()
    start = timezone.localtime(filters.start, tz)
    if filters.bucket == "hour":
        first, step = start.replace(minute=0, second=0, microsecond=0), timedelta(hours=1)
    else:
        first, step = start.replace(hour=0, minute=0, second=0, microsecond=0), timedelta(days=1)
    starts = []
    current = first
    while current < filters.end and len(starts) < 24 * 400:
        starts.append(current)
        # Step in local wall time so days stay days across a DST change.
        current = (current.replace(tzinfo=None) + step).replace(tzinfo=tz)
    return starts


def distribution_over_time(*, qs: QuerySet[ToolInvocation], filters: InvocationFilter, field: str) -> dict:
    """Counts of ``field`` (relevance_level or dedup_reason) per hour or day, for stacked bars.

    Returns ``{"bucket": "hour"|"day", "x": [bucket starts, ISO], "series": {label: [counts]}}``;
    buckets with no calls are present with zeros.
    """
    order = {"relevance_level": RELEVANCE_LEVELS, "dedup_reason": DEDUP_REASONS}[field]
    trunc = TruncHour if filters.bucket == "hour" else TruncDay
    rows = (
        _answered(qs)
        .annotate(t=trunc("created_at", tzinfo=timezone.get_current_timezone()))
        .values("t", field)
        .annotate(n=Count("*"))
        .order_by()
    )
    starts = _bucket_starts(filters)
    position = {s: i for i, s in enumerate(starts)}
    labels = dict(order)
    series: dict[str, list[int]] = {label: [0] * len(starts) for _, label in order}
    for row in rows:
        t = timezone.localtime(row["t"]) if timezone.is_aware(row["t"]) else row["t"]
        i = position.get(t)
        if i is None:  # outside the listed buckets (cannot happen unless the range is enormous)
            continue
        label = labels.get(row[field], str(row[field]))
        series.setdefault(label, [0] * len(starts))[i] += row["n"]
    x = [s.strftime("%Y-%m-%d %H:%M" if filters.bucket == "hour" else "%Y-%m-%d") for s in starts]
    return {"bucket": filters.bucket, "x": x, "series": series}


def _percentile(values_counts: list[tuple[int, int]], total: int, q: float) -> int | None:
    """The nearest-rank q-th percentile of a sorted (value, count) list."""
    if not total:
        return None
    rank = max(1, math.ceil(q / 100.0 * total))
    cumulative = []
    running = 0
    for _, n in values_counts:
        running += n
        cumulative.append(running)
    return values_counts[bisect.bisect_left(cumulative, rank)][0]


def lookups_per_session(*, qs: QuerySet[ToolInvocation]) -> dict:
    """How many calls each session made in the range: the symptom the seeds set out to cure
    (an executor calling lookup_knowledge 20+ times in one conversation).

    Returns sessions, calls, mean, p50, p95, max, and a histogram of sessions by their call count
    (1 .. SESSION_LOOKUPS_CAP-1, then "SESSION_LOOKUPS_CAP+" in one bar).
    """
    inner = qs.values("session_id").annotate(n=Count("*")).values("n").order_by()
    sql, params = inner.query.sql_with_params()
    with connections[qs.db].cursor() as cursor:
        cursor.execute(f"SELECT t.n, COUNT(*) FROM ({sql}) t GROUP BY t.n ORDER BY t.n", params)
        per_count = [(int(n), int(sessions)) for n, sessions in cursor.fetchall()]
    sessions = sum(s for _, s in per_count)
    calls = sum(n * s for n, s in per_count)
    histogram = [0] * SESSION_LOOKUPS_CAP
    for n, s in per_count:
        histogram[min(n, SESSION_LOOKUPS_CAP) - 1] += s
    labels = [str(i) for i in range(1, SESSION_LOOKUPS_CAP)] + [f"{SESSION_LOOKUPS_CAP}+"]
    return {
        "sessions": sessions,
        "calls": calls,
        "mean": round(calls / sessions, 2) if sessions else None,
        "p50": _percentile(per_count, sessions, 50),
        "p95": _percentile(per_count, sessions, 95),
        "max": per_count[-1][0] if per_count else None,
        "histogram": {"labels": labels, "sessions": histogram},
    }


def latency_percentiles(*, qs: QuerySet[ToolInvocation]) -> dict:
    """p50 / p95 / p99 / max of duration_ms (nearest rank), from one GROUP BY duration_ms."""
    per_value = [
        (row["duration_ms"], row["n"])
        for row in qs.values("duration_ms").annotate(n=Count("*")).order_by("duration_ms")
    ]
    total = sum(n for _, n in per_value)
    return {
        "calls": total,
        "p50": _percentile(per_value, total, 50),
        "p95": _percentile(per_value, total, 95),
        "p99": _percentile(per_value, total, 99),
        "max": per_value[-1][0] if per_value else None,
    }


def status_rates(*, qs: QuerySet[ToolInvocation]) -> dict:
    """Calls per status and the error and degraded rates (percent of all calls)."""
    counts = {row["status"]: row["n"] for row in qs.values("status").annotate(n=Count("*")).order_by()}
    total = sum(counts.values())

    def rate(status: str) -> float:
        return round(100.0 * counts.get(status, 0) / total, 2) if total else 0.0

    return {
        "calls": total,
        "counts": {s: counts.get(s, 0) for s in ToolInvocation.Status.values},
        "error_rate": rate(ToolInvocation.Status.ERROR),
        "degraded_rate": rate(ToolInvocation.Status.DEGRADED),
    }


def not_found_queries(*, qs: QuerySet[ToolInvocation], limit: int = 10) -> list[dict]:
    """The most frequent queries that ended not found, most frequent first (ties: alphabetical)."""
    rows = (
        _answered(qs)
        .filter(relevance_level__isnull=True)
        .annotate(query=KT("request__query"))
        .values("query")
        .annotate(n=Count("*"))
        .order_by("-n", "query")[:limit]
    )
    return [{"query": row["query"] or "", "count": row["n"]} for row in rows]


def tool_names() -> list[str]:
    """Tool names that have calls (the dashboard's tool filter)."""
    return list(ToolInvocation.objects.order_by("tool_name").values_list("tool_name", flat=True).distinct())


def dashboard_data(*, filters: InvocationFilter) -> dict:
    """Everything the dashboard page draws, for one set of filters."""
    qs = invocations_filtered(filters=filters)
    return {
        "relevance": relevance_distribution(qs=qs),
        "dedup": dedup_distribution(qs=qs),
        "similarity": similarity_histogram(qs=qs),
        "relevance_over_time": distribution_over_time(qs=qs, filters=filters, field="relevance_level"),
        "dedup_over_time": distribution_over_time(qs=qs, filters=filters, field="dedup_reason"),
        "sessions": lookups_per_session(qs=qs),
        "latency": latency_percentiles(qs=qs),
        "status": status_rates(qs=qs),
        "not_found": not_found_queries(qs=qs),
    }


def level_filter_q(value: str) -> Q:
    """The changelist's level filter: a level name, or "none" for not found."""
    if value == "none":
        return Q(relevance_level__isnull=True) & ~Q(status=ToolInvocation.Status.ERROR)
    return Q(relevance_level=value)
