"""Budgets: one per agent (rate ``tool``, API_THROTTLE_TOOL), one per client address for keys that
fail (rate ``failed_auth``, API_THROTTLE_FAILED_AUTH).

Every agent-facing request spends from its agent's budget: the REST endpoints and Dify's
(``DEFAULT_THROTTLE_CLASSES``: ``AgentThrottle``) and every request to MCP's ``/mcp``, whatever
its JSON-RPC method (``agent_budget_spend``, called by ``retrieval.entrypoints.mcp_http``). The
budget is keyed by the agent (the token's user), not by the token, so a second token or a second
endpoint gives an agent no extra calls. A presented key that matches no active agent spends from
its client address's budget instead (``failed_auth_spend``); past it, the answer is a 429 rather
than a 401. Every refusal carries the seconds to wait (``Retry-After``) and is counted for
Prometheus (``agentkb_budget_refusals_total`` by scope).

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
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from config.breaker import CircuitOpen, redis_address, shared_breaker, shared_breakers_reset
from config.redis_or_memory import RedisOrMemory
from observability.prometheus import budget_refusal_count

logger = logging.getLogger(__name__)

SCOPE = "tool"
FAILED_AUTH_SCOPE = "failed_auth"
# DRF's rate periods (``600/min``): the first letter names the unit.
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Rate:
    calls: int
    window_s: float


def rate_for(scope: str) -> Rate | None:
    """The rate in force for ``scope`` (``DEFAULT_THROTTLE_RATES``), read per call so a changed
    setting applies at once; None = no limit."""
    raw = api_settings.DEFAULT_THROTTLE_RATES.get(scope)
    if not raw:
        return None
    calls, _, period = raw.partition("/")
    return Rate(int(calls), float(_PERIODS[period.strip()[0]]))


# --- the two counters ------------------------------------------------------------------------------
_SPEND_LUA = """
local calls, window_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window_ms)
if redis.call('ZCARD', KEYS[1]) < calls then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window_ms)
  return -1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return tonumber(oldest[2]) + window_ms - now
"""


class RedisWindow:
    """The sliding window in Redis: one script call (one round trip) per spend."""

    def __init__(self) -> None:
        self._script = None

    def spend(self, key: str, rate: Rate) -> float | None:
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
            wait_ms = self._script(
                keys=[cache.make_key(key)],
                args=[rate.calls, int(rate.window_s * 1000), member],
                client=client,
            )
        except redis.RedisError as exc:
            logger.warning("budget %s not counted, Redis did not answer: %s", key, exc)
            breaker.failed(exc)
            return None
        breaker.succeeded()
        return None if wait_ms < 0 else max(wait_ms, 0) / 1000


class MemoryWindow:
    """The sliding window in this process: accepted calls' times per key, under one lock."""

    SWEEP_EVERY_S = 60.0

    def __init__(self) -> None:
        self._calls: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()
        self._longest_window_s = 0.0  # what the sweep keeps: the longest window any rate has

    def spend(self, key: str, rate: Rate) -> float | None:
        now = time.monotonic()
        with self._lock:
            self._longest_window_s = max(self._longest_window_s, rate.window_s)
            if now - self._swept > self.SWEEP_EVERY_S:
                self._sweep(now, self._longest_window_s)
            calls = self._calls.setdefault(key, deque())
            while calls and calls[0] <= now - rate.window_s:
                calls.popleft()
            if len(calls) < rate.calls:
                calls.append(now)
                return None
            return calls[0] + rate.window_s - now

    def _sweep(self, now: float, window_s: float) -> None:
        # Keys whose last call left the window (agents gone quiet, addresses that tried once).
        for key in [k for k, calls in self._calls.items() if not calls or calls[-1] <= now - window_s]:
            del self._calls[key]
        self._swept = now


_window: RedisOrMemory[RedisWindow | MemoryWindow] = RedisOrMemory(redis=RedisWindow, memory=MemoryWindow)


def budget_window() -> RedisWindow | MemoryWindow:
    """This process's counter: Redis when the default cache is django-redis, else memory."""
    return _window.get()


def budget_spend(key: str, scope: str) -> float | None:
    """Spend one call of budget ``key`` at the rate of ``scope``: None when allowed, else the
    seconds until a call is free again (at least 1)."""
    rate = rate_for(scope)
    if rate is None:
        return None
    wait = budget_window().spend(f"budget:{scope}:{key}", rate)
    if wait is None:
        return None
    budget_refusal_count(scope)
    return max(1.0, wait)


# --- who spends ------------------------------------------------------------------------------------
def agent_budget_id(user) -> str:
    """The budget key of an agent: its user's primary key, plus when the user was created, so a
    user re-created under a reused key (SQLite reuses them) does not inherit an old budget."""
    joined = getattr(user, "date_joined", None)
    return f"{user.pk}.{int(joined.timestamp() * 1_000_000)}" if joined else str(user.pk)


def agent_budget_spend(budget_id: str) -> float | None:
    """Spend one call of an agent's budget (``agent_budget_id``): None when allowed, else the
    seconds to wait."""
    return budget_spend(f"agent{budget_id}", SCOPE)


def failed_auth_spend(address: str | None) -> float | None:
    """A presented key matched no active agent: spend one of its client address's failed keys.
    None while the address is within API_THROTTLE_FAILED_AUTH (answer 401), else the seconds to
    wait (answer 429). Only failures spend, so a valid token from the same address still works."""
    return budget_spend(f"ip{address or '-'}", FAILED_AUTH_SCOPE)


def request_address(request) -> str:
    """The client address of a Django request: REMOTE_ADDR. Not X-Forwarded-For, which any
    client can set (DRF's ``get_ident`` trusts it unless NUM_PROXIES is set); behind a proxy
    every client shares the proxy's address, which only failed keys spend."""
    return request.META.get("REMOTE_ADDR") or "-"


# --- refused keys, remembered --------------------------------------------------------------------
class RefusedKeys:
    """Presented keys (by digest) whose agent this process refused, and until when: their next
    requests are refused again before the key is looked up in the database, the costliest step of
    a refusal (about half of it). Safe to trust until then, at the rate it was refused at: a
    sliding window frees a call only as time passes (a changed API_THROTTLE_TOOL voids it). At
    most MAX keys, the oldest forgotten first."""

    MAX = 10_000

    def __init__(self) -> None:
        self._until: OrderedDict[str, tuple[float, Rate | None]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, digest: str, wait: float) -> None:
        with self._lock:
            self._until[digest] = (time.monotonic() + wait, rate_for(SCOPE))
            self._until.move_to_end(digest)
            while len(self._until) > self.MAX:
                self._until.popitem(last=False)

    def wait(self, digest: str) -> float | None:
        """Seconds this key's agent is still refused for, or None."""
        with self._lock:
            remembered = self._until.get(digest)
            if remembered is None:
                return None
            until, rate = remembered
            left = until - time.monotonic()
            if left <= 0 or rate != rate_for(SCOPE):
                del self._until[digest]
                return None
        budget_refusal_count(SCOPE)  # refused again, without spending: still a refusal
        return max(1.0, left)


refused_keys = RefusedKeys()


class AgentThrottle(BaseThrottle):
    """DRF's throttle over the agent's budget; anonymous callers (only the schema and docs pages
    let them through) by address."""

    scope = SCOPE

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request, view) -> bool:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            self._wait = agent_budget_spend(agent_budget_id(user))
            # The AgentToken it came with (a staff session has none)
            digest = getattr(getattr(request, "auth", None), "digest", None)
            if self._wait is not None and digest:
                refused_keys.remember(digest, self._wait)
        else:
            self._wait = budget_spend(f"ip{request_address(request)}", self.scope)
        return self._wait is None

    def wait(self) -> float | None:
        return self._wait


# The name the views used before the budget was shared; same class.
ToolTokenThrottle = AgentThrottle


def budget_window_reset() -> None:
    """Forget this process's counter and its servers' breakers (tests that swap the cache)."""
    _window.reset()
    shared_breakers_reset()
