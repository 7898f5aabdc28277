"""The counters behind the budgets (``retrieval.agents.throttling``): sliding windows.

How a call is counted: a sliding window, as DRF's own throttle counts (at most N accepted calls
in any window of the rate's length; refused calls are not counted), but kept where every process
sees it and changed in one atomic step:

- Redis (the default cache is django-redis, i.e. REDIS_URL is set): one Lua script per call on a
  sorted set per budget, the accepted calls' times from Redis's own clock. Checking and counting
  are one step on the server, so concurrent workers cannot both take the last call (DRF's
  read-append-write of a cached list could: 845 calls in 19 s against 600/min under gunicorn -w 4).
  When Redis does not answer, calls are let through (and a warning logged), as before; one that
  timed out opens a breaker (``DEPENDENCY_BREAKER_SECONDS``), so a hung Redis costs one call its
  socket timeout and the next calls nothing until the cooldown ends;
- anything else (the embedded default's locmem cache, one process): the same window in this
  process's memory, under a lock.

A call must fit every window of its budget (the budget and its burst cap) and is counted in all or
none, in the same one step.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from config.breaker import CircuitOpen, redis_address, shared_breaker
from config.redis_or_memory import RedisOrMemory

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rate:
    calls: int
    window_s: float


# One script for every window of a budget (the budget and its burst cap): each window's expired
# calls dropped, then either every window has room and the call is counted in all of them, or the
# longest wait is returned and nothing is counted. KEYS[i] is window i; ARGV holds its calls and
# length in ms, in pairs, then the call's member.
_SPEND_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local member = ARGV[#ARGV]
local wait = -1
for i = 1, #KEYS do
  local calls, window_ms = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window_ms)
  local held = redis.call('ZCARD', KEYS[i])
  if held >= calls then
    -- free again when the (held - calls + 1)th oldest call leaves the window
    local oldest = redis.call('ZRANGE', KEYS[i], held - calls, held - calls, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + window_ms - now)
  end
end
if wait >= 0 then
  return wait
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now, member)
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2 * i]))
end
return -1
"""

#: A budget's windows: (counter key, rate) for each limit a call must fit.
Windows = list[tuple[str, Rate]]


class RedisWindow:
    """The sliding windows in Redis: one script call (one round trip) per spend."""

    def __init__(self) -> None:
        self._script = None

    def spend(self, windows: Windows) -> float | None:
        import redis
        from django_redis import get_redis_connection

        client = get_redis_connection("default")  # no I/O yet
        # The one breaker of this Redis server: the action memory shares it.
        breaker = shared_breaker(redis_address(client), "Redis", cooldown=settings.DEPENDENCY_BREAKER_SECONDS)
        try:
            breaker.check()
        except CircuitOpen:
            return None  # not counted, as when Redis fails: it failed moments ago
        try:
            if self._script is None:
                self._script = client.register_script(_SPEND_LUA)
            # A member unique to this call: two calls in one millisecond are two calls.
            member = os.urandom(8).hex()
            args: list = [n for _, rate in windows for n in (rate.calls, int(rate.window_s * 1000))]
            wait_ms = self._script(
                keys=[cache.make_key(key) for key, _ in windows], args=[*args, member], client=client
            )
        except redis.RedisError as exc:
            logger.warning("budget %s not counted, Redis did not answer: %s", windows[0][0], exc)
            breaker.failed(exc)
            return None
        breaker.succeeded()
        return None if wait_ms < 0 else max(wait_ms, 0) / 1000


class MemoryWindow:
    """The sliding windows in this process: accepted calls' times per key, under one lock."""

    SWEEP_EVERY_S = 60.0

    def __init__(self) -> None:
        self._calls: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()
        self._longest_window_s = 0.0  # what the sweep keeps: the longest window any rate has

    def spend(self, windows: Windows) -> float | None:
        now = time.monotonic()
        with self._lock:
            self._longest_window_s = max([self._longest_window_s, *(rate.window_s for _, rate in windows)])
            if now - self._swept > self.SWEEP_EVERY_S:
                self._sweep(now, self._longest_window_s)
            wait = None
            for key, rate in windows:
                calls = self._calls.setdefault(key, deque())
                while calls and calls[0] <= now - rate.window_s:
                    calls.popleft()
                if len(calls) >= rate.calls:
                    freed = calls[len(calls) - rate.calls] + rate.window_s - now
                    wait = freed if wait is None else max(wait, freed)
            if wait is not None:
                return wait
            for key, _ in windows:
                self._calls[key].append(now)
            return None

    def _sweep(self, now: float, window_s: float) -> None:
        # Keys whose last call left the window (agents gone quiet, addresses that tried once).
        for key in [k for k, calls in self._calls.items() if not calls or calls[-1] <= now - window_s]:
            del self._calls[key]
        self._swept = now


_window: RedisOrMemory[RedisWindow | MemoryWindow] = RedisOrMemory(redis=RedisWindow, memory=MemoryWindow)


def budget_window() -> RedisWindow | MemoryWindow:
    """This process's counter: Redis when the default cache is django-redis, else memory."""
    return _window.get()


def budget_window_forget() -> None:
    """Forget this process's counter (tests that swap the cache)."""
    _window.reset()
