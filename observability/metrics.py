"""The dashboards' numbers, computed from "facts" (a few counters read by
``observability.selectors``): pure functions, no database, so the same arithmetic serves raw
rows, daily rollups and the tests.

"Not found" is a lookup that ran (status SUCCESS or DEGRADED) and recorded no relevance level.
ERROR rows have no level either; they count in the status rates and nowhere else.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from observability.models import ToolInvocation
from observability.records import DedupReason, RelevanceLevel, ToolName
from observability.rollups import NO_AGENT, SIMILARITY_BINS

LOOKUP_TOOL = ToolName.LOOKUP
DIFY_TOOL = ToolName.DIFY
# The level facts' mark of a Dify call: it has its own outcome, outside the relevance views.
DIFY = "__dify__"

# (value stored in relevance_level, label); None is "not found".
RELEVANCE_LEVELS: list[tuple[str | None, str]] = [
    *((level.value, level.value) for level in RelevanceLevel),
    (None, "not found"),
]
DEDUP_REASONS: list[tuple[str | None, str]] = [
    *((reason.value, reason.value) for reason in DedupReason),
    (None, "none"),
]
# The two labels that are words rather than stored values: keys in English here (the charts'
# colours and the rows are keyed by them), shown translated (``label_display``).
_WORD_LABELS = frozenset([gettext_noop("not found"), gettext_noop("none")])


def label_display(label: str) -> str:
    """A level or dedup label as a staff page shows it: level names stay as the API spells them,
    "not found" / "none" in the page's language."""
    return gettext(label) if label in _WORD_LABELS else label


# Lookups-per-session histogram: 1, 2, ... up to this, then "this or more" in one bar.
SESSION_LOOKUPS_CAP = 10


@dataclass(frozen=True)
class InvocationFilter:
    """Calls in [start, end), optionally of one tool, one domain and one agent (the dashboard;
    ``agent`` is a user id, or NO_AGENT for calls without one), and of one level / dedup reason /
    status (the invocation list's filters; "none" = not found / none)."""

    start: datetime
    end: datetime
    tool_name: str | None = LOOKUP_TOOL
    domain: str | None = None
    agent: int | None = None
    level: str | None = None
    dedup: str | None = None
    status: str | None = None

    @property
    def bucket(self) -> str:
        """Bars per hour up to two days, per day beyond."""
        return "hour" if self.end - self.start <= timedelta(days=2) else "day"


@dataclass
class Facts:
    # (bucket start or None, relevance_level, dedup_reason, status, similarity bin) -> calls
    levels: Counter = field(default_factory=Counter)
    durations: Counter = field(default_factory=Counter)  # duration_ms -> calls
    not_found: Counter = field(default_factory=Counter)  # query -> calls
    sessions: Counter = field(default_factory=Counter)  # calls in the session -> sessions
    # (agent id or None, relevance_level, dedup_reason, status) -> calls: the per-agent breakdown
    agents: Counter = field(default_factory=Counter)
    # (bucket start, duration_ms) -> calls: latency over time
    durations_over_time: Counter = field(default_factory=Counter)
    # (agent id or None, duration_ms) -> calls: each agent's latency in the breakdown
    agent_durations: Counter = field(default_factory=Counter)

    def add(self, other: Facts) -> Facts:
        self.levels.update(other.levels)
        self.durations.update(other.durations)
        self.not_found.update(other.not_found)
        self.sessions.update(other.sessions)
        self.agents.update(other.agents)
        self.durations_over_time.update(other.durations_over_time)
        self.agent_durations.update(other.agent_durations)
        return self


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
    """Lookups that ran to an answer (Dify calls and errors left out)."""
    for (t, level, dedup, status, b), n in levels.items():
        if status != ToolInvocation.Status.ERROR and level != DIFY:
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


def _bucket_labels(filters: InvocationFilter) -> tuple[list[datetime], list[str]]:
    starts = _bucket_starts(filters)
    fmt = "%Y-%m-%d %H:%M" if filters.bucket == "hour" else "%Y-%m-%d"
    return starts, [s.strftime(fmt) for s in starts]


def latency_over_time_from_facts(facts: Facts, *, filters: InvocationFilter) -> dict:
    """p50 and p95 of duration_ms (nearest rank) per hour or day: ``{"bucket", "x", "p50",
    "p95", "calls"}``, None where a bucket had no calls (no line is drawn through it)."""
    starts, x = _bucket_labels(filters)
    position = {s: i for i, s in enumerate(starts)}
    per_bucket: list[Counter] = [Counter() for _ in starts]
    for (t, ms), n in facts.durations_over_time.items():
        i = position.get(t)
        if i is not None and n:
            per_bucket[i][ms] += n
    p50, p95, calls = [], [], []
    for counts in per_bucket:
        per_value = sorted(counts.items())
        total = sum(counts.values())
        p50.append(_percentile(per_value, total, 50))
        p95.append(_percentile(per_value, total, 95))
        calls.append(total)
    return {"bucket": filters.bucket, "x": x, "p50": p50, "p95": p95, "calls": calls}


def agents_from_facts(facts: Facts) -> list[dict]:
    """Per agent (id; NO_AGENT for calls without one): calls, errors, lookups by level, the
    not-found rate (of lookups that ran), dedup reasons, Dify calls, and the p50 / p95 latency of
    all its calls. Most calls first."""
    level_labels = dict(RELEVANCE_LEVELS)
    dedup_labels = dict(DEDUP_REASONS)
    rows: dict[int, dict] = {}
    for (agent, level, dedup, status), n in facts.agents.items():
        key = NO_AGENT if agent is None else agent
        row = rows.setdefault(
            key,
            {
                "agent": key,
                "calls": 0,
                "errors": 0,
                "answered": 0,
                "dify": 0,
                "levels": {label: 0 for _, label in RELEVANCE_LEVELS},
                "dedup": {label: 0 for _, label in DEDUP_REASONS},
            },
        )
        row["calls"] += n
        if status == ToolInvocation.Status.ERROR:
            row["errors"] += n
        elif level == DIFY:
            row["dify"] += n
        else:
            row["answered"] += n
            label = level_labels.get(level, str(level))
            row["levels"][label] = row["levels"].get(label, 0) + n
            dedup_label = dedup_labels.get(dedup, str(dedup))
            row["dedup"][dedup_label] = row["dedup"].get(dedup_label, 0) + n
    durations: dict[int, Counter] = {}
    for (agent, ms), n in facts.agent_durations.items():
        if ms is not None and n:
            durations.setdefault(NO_AGENT if agent is None else agent, Counter())[ms] += n
    for row in rows.values():
        per_value = sorted(durations.get(row["agent"], Counter()).items())
        total = sum(n for _, n in per_value)
        row["p50_ms"], row["p95_ms"] = _percentile(per_value, total, 50), _percentile(per_value, total, 95)
        not_found = row["levels"][level_labels[None]]
        row["not_found"] = not_found
        row["not_found_rate"] = round(100.0 * not_found / row["answered"], 1) if row["answered"] else None
    return sorted(rows.values(), key=lambda r: (-r["calls"], r["agent"]))
