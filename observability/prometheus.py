"""The metrics a process records as things happen, for Prometheus (docs/operations.md, "Metrics
and traces"): lookups by outcome and agent, the lookup's stage latencies, budget refusals.

prometheus_client keeps them in this process's memory, or, when ``PROMETHEUS_MULTIPROC_DIR`` names
a folder (gunicorn's workers: config/gunicorn_conf.py sets one under the var folder), in files
there that every worker writes and any worker's scrape adds up (``observability.scrape``). The
library reads the variable once, when it is imported: this module creates the folder first.

Recording never fails a call: a metric that cannot be written (a full disk under the folder) is
logged and dropped.
"""

from __future__ import annotations

import logging
import os

_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
if _MULTIPROC_DIR:
    os.makedirs(_MULTIPROC_DIR, exist_ok=True)

from prometheus_client import Counter, Histogram, disable_created_metrics  # noqa: E402  (after the folder exists)

# No "<name>_created" series beside each counter and histogram: the multiprocess mode has none,
# and in memory they only double the scrape.
disable_created_metrics()

logger = logging.getLogger(__name__)

#: the label value of "nothing": no level (not found, refused, failed), no dedup, no agent
NONE = "none"

# Lookup stages run from about 0.1 ms (the memory read) to seconds (an embedding on a cold or
# loaded process, a Milvus search at its deadline): buckets from 0.25 ms to 5 s.
STAGE_BUCKETS = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOOKUP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

LOOKUPS = Counter(
    "agentkb_lookups",
    "Recorded agent calls (lookup_knowledge and Dify retrieval) by tool, relevance level, dedup "
    "reason, status and agent (the agent's user id; agentkb_agent_info names it).",
    ["tool", "level", "dedup_reason", "status", "agent"],
)
LOOKUP_SECONDS = Histogram(
    "agentkb_lookup_seconds",
    "Duration of a recorded agent call, by tool, as stored on the call record.",
    ["tool"],
    buckets=LOOKUP_BUCKETS,
)
STAGE_SECONDS = Histogram(
    "agentkb_lookup_stage_seconds",
    "Duration of each lookup stage (retrieval.lookup.clock.StageClock), hit testing included.",
    ["stage"],
    buckets=STAGE_BUCKETS,
)
BUDGET_REFUSALS = Counter(
    "agentkb_budget_refusals",
    "Requests refused (429) because a throttle budget was spent: scope tool (an agent's budget) "
    "or failed_auth (a client address's keys that matched no agent).",
    ["scope"],
)


def lookup_count(
    *,
    tool: str,
    level: str | None,
    dedup_reason: str | None,
    status: str,
    agent_id: int | None,
    duration_ms: float,
) -> None:
    """One recorded agent call (``observability.services.invocation_record``)."""
    try:
        LOOKUPS.labels(
            tool, level or NONE, dedup_reason or NONE, status, NONE if agent_id is None else str(agent_id)
        ).inc()
        LOOKUP_SECONDS.labels(tool).observe(max(0.0, duration_ms) / 1000)
    except Exception:  # a metric never fails the call it counts
        logger.exception("lookup metric not recorded")


def stage_observe(stage: str, seconds: float) -> None:
    """One run of a lookup stage (``retrieval.lookup.clock.StageClock``)."""
    try:
        STAGE_SECONDS.labels(stage).observe(seconds)
    except Exception:
        logger.exception("stage metric not recorded")


def budget_refusal_count(scope: str) -> None:
    """One request refused for a spent budget (``retrieval.agents.throttling``)."""
    try:
        BUDGET_REFUSALS.labels(scope).inc()
    except Exception:
        logger.exception("budget refusal metric not recorded")
