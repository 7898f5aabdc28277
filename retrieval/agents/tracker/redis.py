"""Action memory in Redis: shared by every web process, atomic, idle sessions expire.

Per session two sorted sets under one hash tag (so they live on one Redis Cluster slot):
``<prefix>{<sha256(session)>}:domains`` (domain -> first-retrieved sequence) and ``...:log``
(``domain \\x1f doc_key`` -> sequence). Marking is one Lua script: concurrent lookups of one session
from several processes interleave whole, and nothing is lost. Every mark and every snapshot resets
the TTL (``RETRIEVAL_SESSION_TTL``), so only idle sessions expire.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import redis

from retrieval.agents.tracker.base import RetrievedDocTracker, SessionRetrievals

KEY_PREFIX = "agentkb:retrieval:"
_SEP = "\x1f"

_MARK_LUA = """
local ttl = tonumber(ARGV[1])
local ndom = redis.call('ZCARD', KEYS[1])
local nlog = redis.call('ZCARD', KEYS[2])
for i = 2, #ARGV, 2 do
  local domain = ARGV[i]
  if redis.call('ZADD', KEYS[1], 'NX', ndom, domain) == 1 then ndom = ndom + 1 end
  if redis.call('ZADD', KEYS[2], 'NX', nlog, domain .. '\\31' .. ARGV[i + 1]) == 1 then
    nlog = nlog + 1
  end
end
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
end
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""


class TrackerUnavailable(Exception):
    """The action memory's store did not answer."""


class RedisTracker(RetrievedDocTracker):
    def __init__(self, *, client: redis.Redis, ttl: int, prefix: str = KEY_PREFIX) -> None:
        self.client = client
        self.ttl = ttl
        self.prefix = prefix
        self._mark = client.register_script(_MARK_LUA)

    @classmethod
    def from_url(cls, url: str, *, ttl: int, prefix: str = KEY_PREFIX) -> RedisTracker:
        client = redis.Redis.from_url(
            url, decode_responses=True, socket_timeout=2, socket_connect_timeout=2, health_check_interval=30
        )
        return cls(client=client, ttl=ttl, prefix=prefix)

    def keys(self, session_id: str) -> tuple[str, str]:
        # Hashed: session ids are client-chosen and may hold braces, which would break the tag.
        tag = hashlib.sha256(session_id.encode()).hexdigest()[:32]
        return f"{self.prefix}{{{tag}}}:domains", f"{self.prefix}{{{tag}}}:log"

    def mark_many(self, session_id: str, items: Iterable[tuple[str, str]]) -> list[str]:
        args: list = [self.ttl]
        for domain, doc_key in items:
            args += [domain, doc_key]
        try:
            return list(self._mark(keys=list(self.keys(session_id)), args=args))
        except redis.RedisError as exc:
            raise TrackerUnavailable(f"Redis action memory: {exc}") from exc

    def snapshot(self, session_id: str) -> SessionRetrievals:
        domains_key, log_key = self.keys(session_id)
        try:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.zrange(domains_key, 0, -1)
                pipe.zrange(log_key, 0, -1)
                if self.ttl > 0:
                    pipe.expire(domains_key, self.ttl)
                    pipe.expire(log_key, self.ttl)
                domains, log = pipe.execute()[:2]
        except redis.RedisError as exc:
            raise TrackerUnavailable(f"Redis action memory: {exc}") from exc
        grouped: dict[str, list[str]] = {domain: [] for domain in domains}
        for member in log:
            domain, _, doc_key = member.partition(_SEP)
            grouped.setdefault(domain, []).append(doc_key)
        return SessionRetrievals(grouped)

    def is_domain_retrieved(self, session_id: str, domain: str) -> bool:
        try:
            return self.client.zscore(self.keys(session_id)[0], domain) is not None
        except redis.RedisError as exc:
            raise TrackerUnavailable(f"Redis action memory: {exc}") from exc

    def clear_session(self, session_id: str) -> None:
        try:
            self.client.delete(*self.keys(session_id))
        except redis.RedisError as exc:
            raise TrackerUnavailable(f"Redis action memory: {exc}") from exc
