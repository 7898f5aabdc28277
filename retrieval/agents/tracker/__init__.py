"""Session action memory (seed 000 section 4, FS-3; seed 004 Part A).

``get_tracker()`` returns the process's store, chosen by ``RETRIEVAL_TRACKER_BACKEND``:
``redis`` (shared by every process; production), ``memory`` (in-process; the single-process
embedded default), or empty for redis when ``REDIS_URL`` is set, else memory.

API (the seed's names in Python form): ``mark_retrieved(session, domain, doc_key)``,
``is_doc_retrieved(session, doc_key)``, ``is_domain_retrieved(session, domain)``,
``get_retrieved_domains(session)`` (first-retrieved order), ``clear_session(session)``,
``is_already_retrieved(session, doc_key)`` (ISS-001 name, delegates to ``is_doc_retrieved``), plus
the one-round-trip primitives ``mark_many`` and ``snapshot`` the lookup uses.

Both stores cap the sessions one agent holds (RETRIEVAL_MAX_SESSIONS_PER_AGENT, least recently
used dropped first); ``sessions_evicted()`` counts the dropped ones.
"""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from config.breaker import shared_breakers_reset
from retrieval.agents.tracker.base import RetrievedDocTracker, SessionRetrievals
from retrieval.agents.tracker.memory import MemoryTracker
from retrieval.agents.tracker.redis import RedisTracker, TrackerUnavailable

__all__ = [
    "MemoryTracker",
    "RedisTracker",
    "RetrievedDocTracker",
    "SessionRetrievals",
    "TrackerUnavailable",
    "fallback_tracker",
    "get_tracker",
    "reset_tracker",
    "sessions_evicted",
    "tracker_backend",
]

BACKENDS = ("memory", "redis")

_tracker: RetrievedDocTracker | None = None
_fallback: MemoryTracker | None = None
_lock = threading.Lock()


def tracker_backend() -> str:
    """The configured backend name, validated."""
    backend = (settings.RETRIEVAL_TRACKER_BACKEND or "").strip().lower()
    if not backend:
        return "redis" if settings.REDIS_URL else "memory"
    if backend not in BACKENDS:
        raise ImproperlyConfigured(
            f"RETRIEVAL_TRACKER_BACKEND must be one of {', '.join(BACKENDS)} or empty; got '{backend}'"
        )
    if backend == "redis" and not settings.REDIS_URL:
        raise ImproperlyConfigured("RETRIEVAL_TRACKER_BACKEND=redis needs REDIS_URL set")
    return backend


def get_tracker() -> RetrievedDocTracker:
    global _tracker
    if _tracker is None:
        with _lock:
            if _tracker is None:
                ttl = int(settings.RETRIEVAL_SESSION_TTL)
                cap = int(settings.RETRIEVAL_MAX_SESSIONS_PER_AGENT)
                if tracker_backend() == "redis":
                    _tracker = RedisTracker.from_url(
                        settings.REDIS_URL,
                        ttl=ttl,
                        max_sessions_per_agent=cap,
                        breaker_seconds=settings.DEPENDENCY_BREAKER_SECONDS,
                    )
                else:
                    _tracker = MemoryTracker(ttl=ttl, max_sessions_per_agent=cap)
    return _tracker


def fallback_tracker() -> MemoryTracker:
    """The in-process store a lookup uses while the configured (Redis) store does not answer.

    Policy (README "When something fails"): during a Redis outage each web process remembers its
    own sessions' retrievals, so repeated lookups landing on one process are still deduplicated;
    a session served by several processes may be shown a document twice. Nothing is written back
    to Redis when it returns: the outage's marks expire with the process's memory.
    """
    global _fallback
    if _fallback is None:
        with _lock:
            if _fallback is None:
                _fallback = MemoryTracker(
                    ttl=int(settings.RETRIEVAL_SESSION_TTL),
                    max_sessions_per_agent=int(settings.RETRIEVAL_MAX_SESSIONS_PER_AGENT),
                )
    return _fallback


def sessions_evicted() -> int:
    """Sessions the action memory dropped because their agent held more than
    RETRIEVAL_MAX_SESSIONS_PER_AGENT (least recently used first): the configured store's count
    (Redis: every process's, kept in Redis; memory: this process's since it started), plus this
    process's fallback store's during Redis outages. Raises TrackerUnavailable when Redis does
    not answer. For the dashboards."""
    evicted = get_tracker().sessions_evicted()
    if _fallback is not None:
        evicted += _fallback.sessions_evicted()
    return evicted


def reset_tracker() -> None:
    """Forget the process's store (settings changed, or a test wants a fresh one)."""
    global _tracker, _fallback
    with _lock:
        _tracker = None
        _fallback = None
    shared_breakers_reset()  # a breaker opened on the previous server is not the new one's
