"""Action memory in Redis: shared by every web process, atomic, idle sessions expire.

Per session two sorted sets under one hash tag (so they live on one Redis Cluster slot):
``<prefix>{<sha256(session)>}:domains`` (domain -> first-retrieved sequence) and ``...:log``
(``domain \\x1f doc_key`` -> sequence). Marking is one Lua script: concurrent lookups of one session
from several processes interleave whole, and nothing is lost. Every mark and every snapshot resets
the TTL (``RETRIEVAL_SESSION_TTL``), so only idle sessions expire.

Sessions per agent are capped (RETRIEVAL_MAX_SESSIONS_PER_AGENT): each agent has an index,
``<prefix>agent:<sha256(agent)>:sessions`` (session tag -> last use, in microseconds), kept by the same mark
script (and touched by every snapshot); past the cap the least recently used sessions are dropped
from it and their keys deleted, and ``<prefix>sessions-evicted`` counts them. The index is written
in the mark script beside the session's keys, so it needs one Redis (as ``from_url`` connects
to), not a Redis Cluster, where it would live in another slot.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import redis

from config.breaker import CircuitOpen, redis_address, shared_breaker
from retrieval.agents.tracker.base import RetrievedDocTracker, SessionRetrievals, memory_key_owner

KEY_PREFIX = "agentkb:retrieval:"
_SEP = "\x1f"

_MARK_LUA = """
-- KEYS: the session's domains and log, its agent's index, the eviction counter.
-- ARGV: ttl (s), now (us), the session's tag, the cap (0 = none), then domain, doc key pairs.
local ttl, now, tag, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local ndom = redis.call('ZCARD', KEYS[1])
local nlog = redis.call('ZCARD', KEYS[2])
for i = 5, #ARGV, 2 do
  local domain = ARGV[i]
  if redis.call('ZADD', KEYS[1], 'NX', ndom, domain) == 1 then ndom = ndom + 1 end
  if redis.call('ZADD', KEYS[2], 'NX', nlog, domain .. '\\31' .. ARGV[i + 1]) == 1 then
    nlog = nlog + 1
  end
end
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  -- sessions idle past the TTL expired by themselves: not evictions
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - ttl * 1000000)
end
redis.call('ZADD', KEYS[3], now, tag)
if ttl > 0 then redis.call('EXPIRE', KEYS[3], ttl) end
local evicted = {}
local over = redis.call('ZCARD', KEYS[3]) - cap
if cap > 0 and over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[3], over)
  for i = 1, #popped, 2 do evicted[#evicted + 1] = popped[i] end
  redis.call('INCRBY', KEYS[4], #evicted)
end
return {redis.call('ZRANGE', KEYS[1], 0, -1), evicted}
"""


def _now_us() -> int:
    # Microseconds: calls a millisecond apart would tie, and a tie evicts by tag, not by age.
    return time.time_ns() // 1000


class TrackerUnavailable(Exception):
    """The action memory's store did not answer."""


class RedisTracker(RetrievedDocTracker):
    def __init__(
        self,
        *,
        client: redis.Redis,
        ttl: int,
        prefix: str = KEY_PREFIX,
        max_sessions_per_agent: int = 0,
        breaker_seconds: float = 5.0,
    ) -> None:
        self.client = client
        self.ttl = ttl
        self.prefix = prefix
        self.max_sessions_per_agent = max_sessions_per_agent
        # A Redis that hangs would cost every lookup its socket timeout (several calls each);
        # after one times out, the lookup goes memory-less (fallback store) at once.
        # The one breaker of this Redis server: the budget counter shares it.
        self.breaker = shared_breaker(redis_address(client), "Redis", cooldown=breaker_seconds)
        self._mark = client.register_script(_MARK_LUA)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        ttl: int,
        prefix: str = KEY_PREFIX,
        max_sessions_per_agent: int = 0,
        breaker_seconds: float = 5.0,
    ) -> RedisTracker:
        client = redis.Redis.from_url(
            url, decode_responses=True, socket_timeout=2, socket_connect_timeout=2, health_check_interval=30
        )
        return cls(
            client=client,
            ttl=ttl,
            prefix=prefix,
            max_sessions_per_agent=max_sessions_per_agent,
            breaker_seconds=breaker_seconds,
        )

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Raise TrackerUnavailable for any Redis failure, at once while the breaker is open."""
        try:
            self.breaker.check()
        except CircuitOpen as exc:
            raise TrackerUnavailable(f"Redis action memory: {exc}") from exc
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            self.breaker.failed(exc)
            raise TrackerUnavailable(f"Redis action memory: {exc}") from exc
        except redis.RedisError as exc:
            raise TrackerUnavailable(f"Redis action memory: {exc}") from exc
        self.breaker.succeeded()

    def _tag(self, session_id: str) -> str:
        # Hashed: session ids are client-chosen and may hold braces, which would break the tag.
        return hashlib.sha256(session_id.encode()).hexdigest()[:32]

    def _session_keys(self, tag: str) -> tuple[str, str]:
        return f"{self.prefix}{{{tag}}}:domains", f"{self.prefix}{{{tag}}}:log"

    def keys(self, session_id: str) -> tuple[str, str]:
        return self._session_keys(self._tag(session_id))

    def agent_index_key(self, session_id: str) -> str:
        owner = hashlib.sha256(memory_key_owner(session_id).encode()).hexdigest()[:32]
        return f"{self.prefix}agent:{owner}:sessions"

    @property
    def evicted_key(self) -> str:
        return f"{self.prefix}sessions-evicted"

    def mark_many(self, session_id: str, items: Iterable[tuple[str, str]]) -> list[str]:
        tag = self._tag(session_id)
        args: list = [self.ttl, _now_us(), tag, self.max_sessions_per_agent]
        for domain, doc_key in items:
            args += [domain, doc_key]
        keys = [*self._session_keys(tag), self.agent_index_key(session_id), self.evicted_key]
        with self._guard():
            domains, evicted = self._mark(keys=keys, args=args)
            if evicted:  # keys of other sessions: deleted outside the script, which declares its keys
                self.client.delete(*(key for gone in evicted for key in self._session_keys(gone)))
        return list(domains)

    def snapshot(self, session_id: str) -> SessionRetrievals:
        tag = self._tag(session_id)
        domains_key, log_key = self._session_keys(tag)
        with self._guard(), self.client.pipeline(transaction=True) as pipe:
            pipe.zrange(domains_key, 0, -1)
            pipe.zrange(log_key, 0, -1)
            if self.ttl > 0:
                pipe.expire(domains_key, self.ttl)
                pipe.expire(log_key, self.ttl)
            # A session in use is recently used: the cap evicts others first (XX: a session
            # never marked is not indexed by being read).
            pipe.zadd(self.agent_index_key(session_id), {tag: _now_us()}, xx=True)
            domains, log = pipe.execute()[:2]
        grouped: dict[str, list[str]] = {domain: [] for domain in domains}
        for member in log:
            domain, _, doc_key = member.partition(_SEP)
            grouped.setdefault(domain, []).append(doc_key)
        return SessionRetrievals.from_marks(grouped)

    def is_domain_retrieved(self, session_id: str, domain: str) -> bool:
        with self._guard():
            return self.client.zscore(self.keys(session_id)[0], domain) is not None

    def clear_session(self, session_id: str) -> None:
        with self._guard():
            self.client.delete(*self.keys(session_id))
            self.client.zrem(self.agent_index_key(session_id), self._tag(session_id))

    def sessions_evicted(self) -> int:
        with self._guard():
            return int(self.client.get(self.evicted_key) or 0)
