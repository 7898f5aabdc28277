"""Reads behind the dashboards: distributions of how lookups went, over a filtered set of calls.

Every chart is derived from four GROUP BYs ("facts": calls by level / dedup reason / status /
similarity bin and time bucket; by duration; not-found calls by query; sessions by their number
of calls). They are counted in the database, never row by row, through the covering
``tool_inv_dashboard_idx`` (observability.models), and for dashboard ranges of more than two days
the whole ended days come from the daily rollups (observability.rollups), so the pages stay fast
at a million invocations (see ``bench/dashboard.py``).

"Not found" is a lookup that ran (status SUCCESS or DEGRADED) and recorded no relevance level.
ERROR rows have no level either; they count in the status rates and nowhere else.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta

from django.db import connections
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Floor, TruncDay, TruncHour
from django.utils import timezone

from observability import rollups
from observability.models import InvocationDailyRollup, ToolInvocation
from observability.rollups import SIMILARITY_BINS

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
# Lookups-per-session histogram: 1, 2, ... up to this, then "this or more" in one bar.
SESSION_LOOKUPS_CAP = 10


@dataclass(frozen=True)
class InvocationFilter:
    """Calls in [start, end), optionally of one tool and one domain (the dashboard), and of one
    level / dedup reason / status (the invocation list's filters; "none" = not found / none)."""

    start: datetime
    end: datetime
    tool_name: str | None = LOOKUP_TOOL
    domain: str | None = None
    level: str | None = None
    dedup: str | None = None
    status: str | None = None

    @property
    def bucket(self) -> str:
        """Bars per hour up to two days, per day beyond."""
        return "hour" if self.end - self.start <= timedelta(days=2) else "day"


def invocations_filtered(*, filters: InvocationFilter) -> QuerySet[ToolInvocation]:
    qs = ToolInvocation.objects.filter(created_at__gte=filters.start, created_at__lt=filters.end)
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


@dataclass
class Facts:
    # (bucket start or None, relevance_level, dedup_reason, status, similarity bin) -> calls
    levels: Counter = field(default_factory=Counter)
    durations: Counter = field(default_factory=Counter)  # duration_ms -> calls
    not_found: Counter = field(default_factory=Counter)  # query -> calls
    sessions: Counter = field(default_factory=Counter)  # calls in the session -> sessions

    def add(self, other: Facts) -> Facts:
        self.levels.update(other.levels)
        self.durations.update(other.durations)
        self.not_found.update(other.not_found)
        self.sessions.update(other.sessions)
        return self


def _trunc(bucket: str | None):
    if bucket is None:
        return None
    trunc = TruncHour if bucket == "hour" else TruncDay
    return trunc("created_at", tzinfo=timezone.get_current_timezone())


def _level_facts(qs: QuerySet[ToolInvocation], *, bucket: str | None = None) -> Counter:
    qs = qs.annotate(bin=Floor(F("l1_top_similarity") * SIMILARITY_BINS))
    dims = ["relevance_level", "dedup_reason", "status", "bin"]
    if bucket is not None:
        qs = qs.annotate(t=_trunc(bucket))
        dims = ["t", *dims]
    counts: Counter = Counter()
    for row in qs.values(*dims).annotate(n=Count("*")).order_by():
        t = row.get("t")
        if t is not None and timezone.is_aware(t):
            t = timezone.localtime(t)
        b = None if row["bin"] is None else int(row["bin"])
        counts[(t, row["relevance_level"], row["dedup_reason"], row["status"], b)] += row["n"]
    return counts


def _duration_facts(qs: QuerySet[ToolInvocation]) -> Counter:
    return Counter(
        {r["duration_ms"]: r["n"] for r in qs.values("duration_ms").annotate(n=Count("*")).order_by()}
    )


def _not_found_facts(qs: QuerySet[ToolInvocation]) -> Counter:
    rows = (
        _answered(qs)
        .filter(relevance_level__isnull=True)
        .annotate(query=KT("request__query"))
        .values("query")
        .annotate(n=Count("*"))
        .order_by()
    )
    counts: Counter = Counter()
    for row in rows:
        counts[row["query"] or ""] += row["n"]
    return counts


def _session_facts(qs: QuerySet[ToolInvocation]) -> Counter:
    inner = qs.values("session_id").annotate(n=Count("*")).values("n").order_by()
    sql, params = inner.query.sql_with_params()
    with connections[qs.db].cursor() as cursor:
        cursor.execute(f"SELECT t.n, COUNT(*) FROM ({sql}) t GROUP BY t.n", params)
        return Counter({int(n): int(sessions) for n, sessions in cursor.fetchall()})


def _raw_facts(qs: QuerySet[ToolInvocation], *, bucket: str | None) -> Facts:
    return Facts(
        levels=_level_facts(qs, bucket=bucket),
        durations=_duration_facts(qs),
        not_found=_not_found_facts(qs),
        sessions=_session_facts(qs),
    )


def _rollup_facts(*, days: list[date], filters: InvocationFilter, levels_only: bool = False) -> Facts:
    def rows(kind: str) -> QuerySet:
        return rollups.rollup_rows(kind=kind, days=days, tool_name=filters.tool_name, domain=filters.domain)

    facts = Facts()
    Kind = InvocationDailyRollup.Kind
    for r in (
        _narrowed(rows(Kind.LEVEL), replace(filters, domain=None))
        .values("day", "relevance_level", "dedup_reason", "status", "similarity_bin")
        .annotate(n=Sum("calls"))
    ):
        t = rollups.day_start(r["day"])
        facts.levels[(t, r["relevance_level"], r["dedup_reason"], r["status"], r["similarity_bin"])] += r["n"]
    if levels_only:
        return facts
    for r in rows(Kind.LATENCY).values("value").annotate(n=Sum("calls")):
        facts.durations[r["value"]] += r["n"]
    for r in rows(Kind.NOT_FOUND).values("query").annotate(n=Sum("calls")):
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
    tool_invocation. A view builds at most ``rollups.DAYS_BUILT_PER_VIEW`` missing days itself,
    reads any others raw and queues their build. ``use_rollups=False`` counts everything from
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
        ready = rollups.rollups_ensure(days, build_limit=rollups.DAYS_BUILT_PER_VIEW)
        raw_ranges += rollups.day_ranges([d for d in days if d not in ready])
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


# --- charts' numbers, derived from facts ----------------------------------------------------------


def _distribution(counts: Counter, order: list[tuple[str | None, str]]) -> list[dict]:
    counts = Counter(counts)
    known = [value for value, _ in order]
    total = sum(counts.values())
    rows = [{"value": value, "label": label, "count": counts.pop(value, 0)} for value, label in order]
    # Values the code does not know yet (a level added later) still show, after the known ones.
    rows += [
        {"value": value, "label": str(value), "count": n}
        for value, n in sorted(counts.items(), key=lambda kv: str(kv[0]))
        if value not in known and n
    ]
    for row in rows:
        row["percent"] = round(100.0 * row["count"] / total, 1) if total else 0.0
    return rows


def _answered_levels(levels: Counter):
    for (t, level, dedup, status, b), n in levels.items():
        if status != ToolInvocation.Status.ERROR:
            yield t, level, dedup, status, b, n


def relevance_from_facts(facts: Facts) -> list[dict]:
    counts: Counter = Counter()
    for _, level, _, _, _, n in _answered_levels(facts.levels):
        counts[level] += n
    return _distribution(counts, RELEVANCE_LEVELS)


def dedup_from_facts(facts: Facts) -> list[dict]:
    counts: Counter = Counter()
    for _, _, dedup, _, _, n in _answered_levels(facts.levels):
        counts[dedup] += n
    return _distribution(counts, DEDUP_REASONS)


def similarity_from_facts(facts: Facts) -> dict:
    labels = dict(RELEVANCE_LEVELS)
    levels: dict[str, list[int]] = {label: [0] * SIMILARITY_BINS for _, label in RELEVANCE_LEVELS}
    total = 0
    for _, level, _, _, b, n in _answered_levels(facts.levels):
        if b is None:
            continue
        index = min(max(b, 0), SIMILARITY_BINS - 1)  # a similarity of exactly 1.0: the last bin
        label = labels.get(level, str(level))
        levels.setdefault(label, [0] * SIMILARITY_BINS)[index] += n
        total += n
    bins = [
        {"lo": round(i / SIMILARITY_BINS, 4), "hi": round((i + 1) / SIMILARITY_BINS, 4)}
        for i in range(SIMILARITY_BINS)
    ]
    return {"bins": bins, "levels": levels, "total": total}


def over_time_from_facts(facts: Facts, *, filters: InvocationFilter, field_name: str) -> dict:
    order = {"relevance_level": RELEVANCE_LEVELS, "dedup_reason": DEDUP_REASONS}[field_name]
    starts = _bucket_starts(filters)
    position = {s: i for i, s in enumerate(starts)}
    labels = dict(order)
    series: dict[str, list[int]] = {label: [0] * len(starts) for _, label in order}
    for t, level, dedup, _, _, n in _answered_levels(facts.levels):
        i = position.get(t)
        if i is None:  # outside the listed buckets (cannot happen unless the range is enormous)
            continue
        value = level if field_name == "relevance_level" else dedup
        label = labels.get(value, str(value))
        series.setdefault(label, [0] * len(starts))[i] += n
    x = [s.strftime("%Y-%m-%d %H:%M" if filters.bucket == "hour" else "%Y-%m-%d") for s in starts]
    return {"bucket": filters.bucket, "x": x, "series": series}


def status_from_facts(facts: Facts) -> dict:
    counts: Counter = Counter()
    for (_, _, _, status, _), n in facts.levels.items():
        counts[status] += n
    total = sum(counts.values())

    def rate(status: str) -> float:
        return round(100.0 * counts.get(status, 0) / total, 2) if total else 0.0

    return {
        "calls": total,
        "counts": {s: counts.get(s, 0) for s in ToolInvocation.Status.values},
        "error_rate": rate(ToolInvocation.Status.ERROR),
        "degraded_rate": rate(ToolInvocation.Status.DEGRADED),
    }


def latency_from_facts(facts: Facts) -> dict:
    per_value = sorted((v, n) for v, n in facts.durations.items() if n)
    total = sum(n for _, n in per_value)
    return {
        "calls": total,
        "p50": _percentile(per_value, total, 50),
        "p95": _percentile(per_value, total, 95),
        "p99": _percentile(per_value, total, 99),
        "max": per_value[-1][0] if per_value else None,
    }


def not_found_from_facts(facts: Facts, *, limit: int = 10) -> list[dict]:
    ranked = sorted(((-n, q) for q, n in facts.not_found.items() if n))[:limit]
    return [{"query": q, "count": -negative} for negative, q in ranked]


def sessions_from_facts(facts: Facts) -> dict:
    per_count = sorted((n, s) for n, s in facts.sessions.items() if s)
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
    """p50 / p95 / p99 / max of duration_ms (nearest rank), from one GROUP BY duration_ms."""
    return latency_from_facts(Facts(durations=_duration_facts(qs)))


def status_rates(*, qs: QuerySet[ToolInvocation]) -> dict:
    """Calls per status and the error and degraded rates (percent of all calls)."""
    return status_from_facts(Facts(levels=_level_facts(qs)))


def not_found_queries(*, qs: QuerySet[ToolInvocation], limit: int = 10) -> list[dict]:
    """The most frequent queries that ended not found, most frequent first (ties: alphabetical)."""
    return not_found_from_facts(Facts(not_found=_not_found_facts(qs)), limit=limit)


def tool_names() -> list[str]:
    """Tool names that have calls (the dashboard's tool filter)."""
    return list(ToolInvocation.objects.order_by("tool_name").values_list("tool_name", flat=True).distinct())


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
    }


def level_filter_q(value: str) -> Q:
    """The changelist's level filter: a level name, or "none" for not found."""
    if value == "none":
        return Q(relevance_level__isnull=True) & ~Q(status=ToolInvocation.Status.ERROR)
    return Q(relevance_level=value)
