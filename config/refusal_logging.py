"""One log line per agent per minute for budget refusals, not one per refused call.

Django logs every 4xx answer on ``django.request`` at WARNING ("Too Many Requests: /api/...").
An agent flooding past its budget would write one such line per refused call: thousands a
minute, burying the warnings that matter and costing the disk what the budget saved the service.
This filter, on the ``django.request`` logger (settings.LOGGING), lets through the first 429 of
each credential (or, without one, each client address) in a window, at INFO and with the count
of refusals it held back since the previous line; the rest of the window is dropped. Other
statuses pass unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time

from django.utils.functional import SimpleLazyObject

#: The budgets are per minute (API_THROTTLE_*): one line per budget window.
WINDOW_SECONDS = 60.0
#: Callers remembered at once; past it the oldest windows are forgotten (a flood of addresses
#: must not grow this process's memory without end; forgetting costs at most one extra line).
MAX_CALLERS = 10_000


def _caller(record: logging.LogRecord) -> str:
    """Who was refused: the credential presented (a short digest: the same agent is refused
    before its user is looked up once a worker knows its key is over budget), else the address."""
    request = getattr(record, "request", None)
    if request is None:
        return "unknown"
    credential = request.META.get("HTTP_AUTHORIZATION", "")
    if credential:
        return f"token {hashlib.sha256(credential.encode()).hexdigest()[:12]}"
    return f"address {request.META.get('REMOTE_ADDR', '?')}"


def _agent(record: logging.LogRecord) -> str:
    """The agent's id when DRF already put it on the request; the auth middleware's lazy user is
    not evaluated here (it would read the session: a query inside logging)."""
    user = getattr(record, "request", None).__dict__.get("user")
    if (
        user is not None
        and not isinstance(user, SimpleLazyObject)
        and getattr(user, "is_authenticated", False)
    ):
        return f" (agent {user.pk})"
    return ""


class RefusalsOncePerWindow(logging.Filter):
    def __init__(self, name: str = "", *, window: float = WINDOW_SECONDS, clock=time.monotonic) -> None:
        super().__init__(name)
        self.window = window
        self.clock = clock
        self._lock = threading.Lock()
        self._opened: dict[str, float] = {}  # caller -> when its current window opened
        self._held: dict[str, int] = {}  # caller -> refusals dropped in its current window

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) != 429:
            return True
        caller = _caller(record)
        now = self.clock()
        with self._lock:
            opened = self._opened.get(caller)
            if opened is not None and now - opened < self.window:
                self._held[caller] = self._held.get(caller, 0) + 1
                return False
            held = self._held.pop(caller, 0)
            self._opened.pop(caller, None)
            if len(self._opened) >= MAX_CALLERS:
                oldest = min(self._opened, key=self._opened.__getitem__)
                self._opened.pop(oldest)
                self._held.pop(oldest, None)
            self._opened[caller] = now
        request = getattr(record, "request", None)
        path, agent = (request.path, _agent(record)) if request is not None else ("?", "")
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        record.msg = "budget refused (429) %s%s on %s; %d more refusals held back in the last window"
        record.args = (caller, agent, path, held)
        record.exc_info = record.exc_text = None
        return True
