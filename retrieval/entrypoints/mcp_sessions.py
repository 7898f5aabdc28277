"""MCP sessions every web worker sees: who opened each ``Mcp-Session-Id``, and how many an agent
holds open.

The SDK's streamable HTTP transport runs statelessly (a fresh transport per request), so no
worker keeps anything another needs: the session id is minted here, its owner (the agent and
its token's hash) kept where every process reads it, and a request presenting the id is served
by whichever worker it reaches. The action memory is keyed by the id (``mcp-<id>``) and lives
in the session tracker (Redis in production), so it follows the session across workers too.

- Redis (the default cache is django-redis): one key per session (its owner, expiring when idle
  for MCP_SESSION_IDLE_S) and one sorted set per agent (its sessions by expiry time); opening
  counts and adds in one Lua script, so four workers cannot together open more than the cap;
- anything else (the embedded default, one process): the same in this process's memory.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from config.redis_or_memory import RedisOrMemory


@dataclass(frozen=True)
class Owner:
    agent_id: int
    subject: str  # the token's hash (``mcp_http._principal``): another token is another owner


def idle_seconds() -> int:
    return int(settings.MCP_SESSION_IDLE_S)


_OPEN_LUA = """
local now, ttl, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if cap > 0 and redis.call('ZCARD', KEYS[1]) >= cap then return 0 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[4])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('SET', KEYS[2], ARGV[5], 'EX', ttl)
return 1
"""


class RedisSessions:
    def __init__(self) -> None:
        self._script = None

    def _client(self):
        from django_redis import get_redis_connection

        return get_redis_connection("default")

    @staticmethod
    def _keys(agent_id: int, session_id: str) -> tuple[str, str]:
        return cache.make_key(f"mcp:agent:{agent_id}"), cache.make_key(f"mcp:session:{session_id}")

    def open(self, owner: Owner, cap: int) -> str | None:
        client = self._client()
        if self._script is None:
            self._script = client.register_script(_OPEN_LUA)
        session_id = uuid.uuid4().hex
        ttl = idle_seconds()
        opened = self._script(
            keys=list(self._keys(owner.agent_id, session_id)),
            args=[int(time.time()), ttl, cap, session_id, f"{owner.agent_id}:{owner.subject}"],
            client=client,
        )
        return session_id if opened else None

    def owner(self, session_id: str) -> Owner | None:
        """The session's owner, its idle expiry pushed back; None when unknown or expired."""
        client = self._client()
        session_key = cache.make_key(f"mcp:session:{session_id}")
        raw = client.getex(session_key, ex=idle_seconds())
        if raw is None:
            return None
        agent_id, _, subject = raw.decode().partition(":")
        agent_key, _ = self._keys(int(agent_id), session_id)
        client.zadd(agent_key, {session_id: int(time.time()) + idle_seconds()}, xx=True)
        return Owner(int(agent_id), subject)

    def close(self, session_id: str, owner: Owner) -> None:
        agent_key, session_key = self._keys(owner.agent_id, session_id)
        client = self._client()
        client.delete(session_key)
        client.zrem(agent_key, session_id)

    def open_count(self, agent_id: int) -> int:
        agent_key = cache.make_key(f"mcp:agent:{agent_id}")
        return int(self._client().zcount(agent_key, int(time.time()) + 1, "+inf"))


class MemorySessions:
    def __init__(self) -> None:
        self._sessions: dict[str, tuple[Owner, float]] = {}
        self._lock = threading.Lock()

    def _sweep(self, now: float) -> None:
        for session_id in [s for s, (_, until) in self._sessions.items() if until <= now]:
            del self._sessions[session_id]

    def open(self, owner: Owner, cap: int) -> str | None:
        now = time.monotonic()
        with self._lock:
            self._sweep(now)
            if cap > 0 and sum(1 for o, _ in self._sessions.values() if o.agent_id == owner.agent_id) >= cap:
                return None
            session_id = uuid.uuid4().hex
            self._sessions[session_id] = (owner, now + idle_seconds())
            return session_id

    def owner(self, session_id: str) -> Owner | None:
        now = time.monotonic()
        with self._lock:
            found = self._sessions.get(session_id)
            if found is None or found[1] <= now:
                self._sessions.pop(session_id, None)
                return None
            self._sessions[session_id] = (found[0], now + idle_seconds())
            return found[0]

    def close(self, session_id: str, owner: Owner) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def open_count(self, agent_id: int) -> int:
        now = time.monotonic()
        with self._lock:
            return sum(1 for o, until in self._sessions.values() if o.agent_id == agent_id and until > now)


_registry: RedisOrMemory[RedisSessions | MemorySessions] = RedisOrMemory(
    redis=RedisSessions, memory=MemorySessions
)


def session_registry() -> RedisSessions | MemorySessions:
    """This process's view of the open MCP sessions: Redis when the default cache is
    django-redis, else memory."""
    return _registry.get()


def session_registry_reset() -> None:
    """Forget this process's registry (tests that swap the cache)."""
    _registry.reset()
