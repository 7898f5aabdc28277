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

How a call is counted (the sliding windows, in Redis or in this process):
``retrieval.agents.budget_windows``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from config.breaker import shared_breakers_reset
from observability.prometheus import budget_refusal_count
from retrieval.agents.budget_windows import Rate, budget_window, budget_window_forget

SCOPE = "tool"
FAILED_AUTH_SCOPE = "failed_auth"
#: A scope's burst cap is the rate of scope ``<scope>_burst`` (``tool_burst``: API_THROTTLE_TOOL_BURST).
BURST_SUFFIX = "_burst"
# DRF's rate periods (``600/min``): the first letter names the unit.
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def rate_for(scope: str) -> Rate | None:
    """The rate in force for ``scope`` (``DEFAULT_THROTTLE_RATES``), read per call so a changed
    setting applies at once; None = no limit."""
    raw = api_settings.DEFAULT_THROTTLE_RATES.get(scope)
    if not raw:
        return None
    calls, _, period = raw.partition("/")
    return Rate(int(calls), float(_PERIODS[period.strip()[0]]))


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
    budget_window_forget()
    shared_breakers_reset()
