"""In-process action memory: for the single-process embedded default (``make run``).

Several web processes would each hold their own copy; production uses the Redis store.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable

from retrieval.agents.tracker.base import RetrievedDocTracker, SessionRetrievals, memory_key_owner

# Expired sessions are swept at most this often, by whichever call comes next.
_SWEEP_EVERY = 60.0


class _Session:
    __slots__ = ("domains", "touched")

    def __init__(self) -> None:
        # Dicts as insertion-ordered sets: domains in first-retrieved order, docs likewise.
        self.domains: dict[str, dict[str, None]] = {}
        self.touched = time.monotonic()


class MemoryTracker(RetrievedDocTracker):
    """Thread-safe: one lock around a dict of sessions. Idle sessions expire after ``ttl``
    seconds; a ``ttl`` of 0 or less keeps them for the process's life, as the Redis store keeps
    its keys without an expiry (a store forgetting at once would hand every document again).

    ``max_sessions_per_agent`` (RETRIEVAL_MAX_SESSIONS_PER_AGENT; 0 = no cap): an agent that opens
    more sessions than this loses its least recently used ones (each counted in
    ``sessions_evicted``), so one agent minting a session per call cannot fill the process's
    memory; other agents' sessions are never touched. The agent of a session is the owner part of
    its key (``memory_key_owner``)."""

    def __init__(self, *, ttl: int, max_sessions_per_agent: int = 0) -> None:
        self.ttl = ttl
        self.max_sessions_per_agent = max_sessions_per_agent
        self._sessions: dict[str, _Session] = {}
        # Per agent, its session keys from least to most recently used.
        self._by_agent: dict[str, OrderedDict[str, None]] = {}
        self._evicted = 0
        self._lock = threading.Lock()
        self._swept = time.monotonic()

    def _expired(self, session: _Session, now: float) -> bool:
        return self.ttl > 0 and now - session.touched > self.ttl

    def _forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        owner = memory_key_owner(session_id)
        order = self._by_agent.get(owner)
        if order is not None:
            order.pop(session_id, None)
            if not order:
                del self._by_agent[owner]

    def _used(self, session_id: str) -> None:
        """Mark ``session_id`` most recently used by its agent; past the cap, evict the least."""
        order = self._by_agent.setdefault(memory_key_owner(session_id), OrderedDict())
        order[session_id] = None
        order.move_to_end(session_id)
        while self.max_sessions_per_agent > 0 and len(order) > self.max_sessions_per_agent:
            oldest, _ = order.popitem(last=False)
            self._sessions.pop(oldest, None)
            self._evicted += 1

    def _live(self, session_id: str, *, create: bool) -> _Session | None:
        now = time.monotonic()
        if now - self._swept > _SWEEP_EVERY:
            for key in [k for k, s in self._sessions.items() if self._expired(s, now)]:
                self._forget(key)
            self._swept = now
        session = self._sessions.get(session_id)
        if session is not None and self._expired(session, now):
            self._forget(session_id)
            session = None
        if session is None and create:
            session = self._sessions[session_id] = _Session()
        if session is not None:
            session.touched = now
            self._used(session_id)
        return session

    def mark_many(self, session_id: str, items: Iterable[tuple[str, str]]) -> list[str]:
        with self._lock:
            session = self._live(session_id, create=True)
            assert session is not None
            for domain, doc_key in items:
                session.domains.setdefault(domain, {})[doc_key] = None
            return list(session.domains)

    def snapshot(self, session_id: str) -> SessionRetrievals:
        with self._lock:
            session = self._live(session_id, create=False)
            if session is None:
                return SessionRetrievals()
            return SessionRetrievals.from_marks({d: list(docs) for d, docs in session.domains.items()})

    def clear_session(self, session_id: str) -> None:
        with self._lock:
            self._forget(session_id)

    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def sessions_evicted(self) -> int:
        """Sessions dropped by the per-agent cap since this store was created."""
        with self._lock:
            return self._evicted
