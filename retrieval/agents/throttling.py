"""Budgets: one per agent (rate ``tool``, API_THROTTLE_TOOL, within a burst cap ``tool_burst``,
API_THROTTLE_TOOL_BURST), one per client address for keys that fail (rate ``failed_auth``,
API_THROTTLE_FAILED_AUTH).

Why a burst cap: a budget per minute alone lets an agent spend the whole minute's calls in its
first second or two (600 lookups at once), and every other agent's lookups queue behind them for
the CPU. The cap (20 a second by default, twice the budget's average rate) spreads a flood over
the minute; an agent's own bursts of parallel tool calls stay well under it.

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

A call must fit every window of its budget (the budget and its burst cap) and is counted in all or
none, in the same one step.
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
#: A scope's burst cap is the rate of scope ``<scope>_burst`` (``tool_burst``: API_THROTTLE_TOOL_BURST).
BURST_SUFFIX = "_burst"
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


def budget_rates(scope: str) -> tuple[Rate | None, Rate | None]:
    """The rate of ``scope`` and of its burst cap (scope ``<scope>_burst``), as in force now."""
    return rate_for(scope), rate_for(f"{scope}{BURST_SUFFIX}")


def budget_spend(key: str, scope: str) -> float | None:
    """Spend one call of budget ``key`` at the rate of ``scope`` and within its burst cap, if one
    is set: None when allowed, else the seconds until a call is free again (at least 1)."""
    rate, burst = budget_rates(scope)
    windows = [(f"budget:{scope}:{key}", rate)] if rate else []
    if burst:
        windows.append((f"budget:{scope}{BURST_SUFFIX}:{key}", burst))
    if not windows:
        return None
    wait = budget_window().spend(windows)
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
    sliding window frees a call only as time passes (a changed API_THROTTLE_TOOL or
    API_THROTTLE_TOOL_BURST voids it). At
    most MAX keys, the oldest forgotten first."""

    MAX = 10_000

    def __init__(self) -> None:
        self._until: OrderedDict[str, tuple[float, tuple[Rate | None, Rate | None]]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, digest: str, wait: float) -> None:
        with self._lock:
            self._until[digest] = (time.monotonic() + wait, budget_rates(SCOPE))
            self._until.move_to_end(digest)
            while len(self._until) > self.MAX:
                self._until.popitem(last=False)

    def wait(self, digest: str) -> float | None:
        """Seconds this key's agent is still refused for, or None."""
        with self._lock:
            remembered = self._until.get(digest)
            if remembered is None:
                return None
            until, rates = remembered
            left = until - time.monotonic()
            if left <= 0 or rates != budget_rates(SCOPE):
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
