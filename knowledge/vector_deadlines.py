"""Every Milvus call bounded: a per-call deadline and a short circuit breaker.

pymilvus takes a ``timeout`` per call, but the client's own (given at connect) bounds only the
connection: a store that accepts connections and never answers (a SIGSTOPped server, a hung
node) held each search, and ``ping()``, until gunicorn killed the worker. Here each call gets
its deadline: the lookup's reads a short one (the lookup then answers keyword-only, DEGRADED),
writes and maintenance the longer ``MILVUS_TIMEOUT``. A call that times out or loses its
connection opens the breaker (``config.breaker``), so the calls after it fail at once instead of
waiting out a deadline each; the store is asked again after the cooldown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from config.breaker import CircuitBreaker, CircuitOpen

# What a lookup or /healthz waits on: answered in milliseconds by a healthy store.
READS = frozenset(
    {"search", "hybrid_search", "query", "list_collections", "get_server_version", "describe_collection"}
)


def timed_out(exc: BaseException) -> bool:
    """Whether a failure is a missed deadline (the server hangs), not a refused request."""
    text = str(exc).lower()
    return "deadline" in text or "timed out" in text or "timeout" in text


class CallGuard:
    """The deadlines and the breaker of one store."""

    def __init__(self, name: str, *, timeout: float, read_timeout: float, cooldown: float) -> None:
        self.timeout = timeout
        self.read_timeout = min(read_timeout, timeout)
        self.breaker = CircuitBreaker(name, cooldown=cooldown)

    def deadline(self, fn_name: str) -> float:
        return self.read_timeout if fn_name in READS else self.timeout

    def run(
        self,
        fn_name: str,
        call: Callable[[], Any],
        *,
        refused: Callable[[str], Exception],
        lost: Callable[[Exception], bool],
        probe: bool = False,
    ) -> Any:
        """Run ``call`` unless the breaker is open (then raise ``refused(reason)``); open it when
        the call fails in a way ``lost`` says is the server not answering. A ``probe`` (the
        health check's ping) always asks, and its answer closes the breaker: a server that is
        back shows as up at once, not after the cooldown."""
        try:
            if not probe:
                self.breaker.check()
        except CircuitOpen as exc:
            raise refused(str(exc)) from exc
        try:
            result = call()
        except Exception as exc:
            if lost(exc):
                self.breaker.failed(exc)
            raise
        self.breaker.succeeded()
        return result
