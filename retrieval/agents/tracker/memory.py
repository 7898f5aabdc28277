"""In-process action memory: for the single-process embedded default (``make run``).

Several web processes would each hold their own copy; production uses the Redis store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from retrieval.agents.tracker.base import RetrievedDocTracker, SessionRetrievals

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
    its keys without an expiry (a store forgetting at once would hand every document again)."""

    def __init__(self, *, ttl: int) -> None:
        self.ttl = ttl
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()

    def _expired(self, session: _Session, now: float) -> bool:
        return self.ttl > 0 and now - session.touched > self.ttl

    def _live(self, session_id: str, *, create: bool) -> _Session | None:
        now = time.monotonic()
        if now - self._swept > _SWEEP_EVERY:
            for key in [k for k, s in self._sessions.items() if self._expired(s, now)]:
                del self._sessions[key]
            self._swept = now
        session = self._sessions.get(session_id)
        if session is not None and self._expired(session, now):
            del self._sessions[session_id]
            session = None
        if session is None and create:
            session = self._sessions[session_id] = _Session()
        if session is not None:
            session.touched = now
        return session

    def mark_many(self, session_id: str, items: Iterable[tuple[str, str]]) -> list[str]:
        with self._lock:
            session = self._live(session_id, create=True)
            for domain, doc_key in items:
                session.domains.setdefault(domain, {})[doc_key] = None
            return list(session.domains)

    def snapshot(self, session_id: str) -> SessionRetrievals:
        with self._lock:
            session = self._live(session_id, create=False)
            if session is None:
                return SessionRetrievals()
            return SessionRetrievals({d: list(docs) for d, docs in session.domains.items()})

    def clear_session(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)
