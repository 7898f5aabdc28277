"""One throttle budget per agent (rate ``tool`` in REST_FRAMEWORK, API_THROTTLE_TOOL).

Every agent-facing endpoint spends from the same budget: the lookup, the session endpoints,
feedback, the knowledge map, the prompts, Dify's endpoint (``DEFAULT_THROTTLE_CLASSES``) and MCP
tool calls (``agent_budget_spend``, called by ``retrieval.entrypoints.mcp_server``). The budget is keyed by the
agent (the token's user), not by the token, so a second token or a second endpoint gives an
agent no extra calls; it is kept in the default cache (Redis in production), shared by every
process. Every refusal is a 429 with ``Retry-After``.
"""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

SCOPE = "tool"


class AgentThrottle(SimpleRateThrottle):
    scope = SCOPE

    def get_rate(self) -> str | None:
        # Read per request, not at import, so a changed setting applies (tests, reloads).
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request, view) -> str | None:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return self.agent_key(agent_budget_id(user))
        # Anonymous callers (only the schema and docs pages let them through) by address; a
        # request without one (WSGI callers may omit REMOTE_ADDR) shares one bucket.
        return self.cache_format % {"scope": self.scope, "ident": f"ip{self.get_ident(request) or '-'}"}

    def agent_key(self, budget_id: str) -> str:
        return self.cache_format % {"scope": self.scope, "ident": f"agent{budget_id}"}

    def allow_key(self, key: str | None) -> bool:
        """DRF's ``allow_request`` for an already-known cache key (a sliding window of call times)."""
        if self.rate is None or key is None:
            return True
        self.key = key
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) >= self.num_requests:
            return self.throttle_failure()
        return self.throttle_success()

    def allow_request(self, request, view) -> bool:
        return self.allow_key(self.get_cache_key(request, view))


# The name the views used before the budget was shared; same class.
ToolTokenThrottle = AgentThrottle


def agent_budget_id(user) -> str:
    """The budget key of an agent: its user's primary key, plus when the user was created, so a
    user re-created under a reused key (SQLite reuses them) does not inherit an old budget."""
    joined = getattr(user, "date_joined", None)
    return f"{user.pk}.{int(joined.timestamp() * 1_000_000)}" if joined else str(user.pk)


def agent_budget_spend(budget_id: str) -> float | None:
    """Spend one call of an agent's budget (``agent_budget_id``): None when allowed, else the
    seconds to wait."""
    throttle = AgentThrottle()
    if throttle.allow_key(throttle.agent_key(budget_id)):
        return None
    return max(1.0, throttle.wait() or 1.0)
