"""Stage "memory": what this session already holds (seed 004 Part A), as the agent's scope lets
it see it.

When the shared action memory (Redis) does not answer, the lookup reads this process's own
memory instead and says so (``degraded``): an agent keeps getting answers through an outage, at
the cost of dedup across processes (``retrieval.agents.tracker.fallback_tracker``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from retrieval.agents.scopes import memory_scoped
from retrieval.agents.tracker import (
    RetrievedDocTracker,
    SessionRetrievals,
    TrackerUnavailable,
    fallback_tracker,
    get_tracker,
    tracker_backend,
)
from retrieval.lookup.request import LookupRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryRead:
    #: domain -> doc keys the session holds, within the agent's scope
    memory: SessionRetrievals
    #: the store that answered: the one to mark in after the lookup
    tracker: RetrievedDocTracker
    #: "redis", "memory", or "memory-fallback" when this process stood in for Redis
    backend: str
    degraded: tuple[str, ...] = ()


def memory_read(request: LookupRequest) -> MemoryRead:
    session_id, domains = request.session_id, request.domains
    tracker = get_tracker()
    try:
        memory = tracker.snapshot(session_id)
    except TrackerUnavailable as exc:
        logger.warning("action memory unavailable, using this process's memory: %s", exc)
        fallback = fallback_tracker()
        return MemoryRead(
            memory=memory_scoped(fallback.snapshot(session_id), domains),
            tracker=fallback,
            backend="memory-fallback",
            degraded=(f"action memory unavailable (using this process's memory): {exc}",),
        )
    return MemoryRead(memory=memory_scoped(memory, domains), tracker=tracker, backend=tracker_backend())
