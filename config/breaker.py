"""A short circuit breaker per dependency (Milvus, Redis, the database).

A dependency that hangs costs its whole deadline on every call: with four web workers and a
store stopped mid-answer, each lookup would wait seconds, one after another. Once a call to it
fails for want of an answer (timed out, connection lost), the breaker opens: for ``cooldown``
seconds every call fails at once, so the lookup degrades as it does when the dependency is
stopped. After the cooldown the next call goes through again (half-open): if it answers, the
breaker closes; if not, it opens for another cooldown. A recovered dependency is therefore used
again at most ``cooldown`` seconds after it returns, without a restart.

Clients of one server share its breaker (``shared_breaker``): the action memory and the budget
counter both talk to one Redis, so once one of them has waited out a timeout the other does not
wait out its own in the same lookup.

It lives in ``config``: a base every app may use, importing none of them.
"""

from __future__ import annotations

import threading
import time


class CircuitOpen(Exception):
    """A call was refused without asking the dependency: it failed moments ago."""


class CircuitBreaker:
    def __init__(self, name: str, *, cooldown: float) -> None:
        self.name = name
        self.cooldown = cooldown
        self._lock = threading.Lock()
        self._open_until = 0.0
        self._last_error = ""

    @property
    def is_open(self) -> bool:
        return time.monotonic() < self._open_until

    def check(self) -> None:
        """Raise CircuitOpen while the breaker is open."""
        remaining = self._open_until - time.monotonic()
        if remaining > 0:
            raise CircuitOpen(
                f"{self.name} failed {self.cooldown - remaining:.1f} s ago ({self._last_error}); "
                f"not asked again for {remaining:.1f} s"
            )

    def failed(self, error: object) -> None:
        """The dependency did not answer: refuse calls for the next ``cooldown`` seconds."""
        with self._lock:
            self._open_until = time.monotonic() + self.cooldown
            self._last_error = str(error)[:200]

    def succeeded(self) -> None:
        with self._lock:
            self._open_until = 0.0
            self._last_error = ""


_shared: dict[str, CircuitBreaker] = {}
_shared_lock = threading.Lock()


def shared_breaker(address: str, name: str, *, cooldown: float) -> CircuitBreaker:
    """This process's one breaker for the server at ``address`` (the first caller names it and
    sets its cooldown)."""
    with _shared_lock:
        breaker = _shared.get(address)
        if breaker is None:
            breaker = _shared[address] = CircuitBreaker(name, cooldown=cooldown)
        return breaker


def shared_breakers_reset() -> None:
    """Forget every shared breaker (tests that point a client at another server)."""
    with _shared_lock:
        _shared.clear()


def redis_address(client: object) -> str:
    """The server a redis-py client talks to, as a shared breaker's address."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    where = kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    return f"redis {where}"
