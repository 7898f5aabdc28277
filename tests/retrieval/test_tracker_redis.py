"""The Redis action memory's rules that the FS-3 tests leave open: every call names an outage the
same way (the lookup then falls back to the in-process store), and a session TTL of 0 sets no
expiry. The outage tests need no Redis (nothing listens on the port); the TTL one does."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from retrieval.agents.tracker import RedisTracker, TrackerUnavailable
from tests.conftest import free_port


@pytest.fixture
def unreachable():
    return RedisTracker.from_url(f"redis://127.0.0.1:{free_port()}/0", ttl=3600)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.mark_many("s1", [("api", "a.md")]),
        lambda t: t.snapshot("s1"),
        lambda t: t.is_domain_retrieved("s1", "api"),
        lambda t: t.clear_session("s1"),
    ],
    ids=["mark_many", "snapshot", "is_domain_retrieved", "clear_session"],
)
def test_every_call_to_an_unreachable_redis_raises_tracker_unavailable(unreachable, call):
    with pytest.raises(TrackerUnavailable, match="Redis action memory"):
        call(unreachable)


@pytest.mark.services
@pytest.mark.parametrize("ttl", [0, -1])
def test_a_session_ttl_of_zero_or_less_sets_no_expiry(settings, ttl):
    # As the marking script reads it (``if ttl > 0``): a read must not expire (delete) the keys
    prefix = f"agentkb:test:{uuid.uuid4().hex[:12]}:"
    tracker = RedisTracker.from_url(settings.REDIS_URL, ttl=ttl, prefix=prefix)
    try:
        tracker.mark_retrieved("s1", "api", "a.md")
        assert tracker.snapshot("s1").domains == {"api": ["a.md"]}
        # Read again: the first read did not expire (delete) it either
        assert tracker.snapshot("s1").domains == {"api": ["a.md"]}
        assert [tracker.client.ttl(key) for key in tracker.keys("s1")] == [-1, -1]
    finally:
        tracker.client.delete(*tracker.keys("s1"), tracker.agent_index_key("s1"))


def test_session_keys_are_the_prefix_and_a_hash_tag_of_the_session():
    tracker = RedisTracker.from_url("redis://127.0.0.1:1/0", ttl=60, prefix="p:")
    tag = hashlib.sha256("会话 {1}".encode()).hexdigest()[:32]
    assert tracker.keys("会话 {1}") == (f"p:{{{tag}}}:domains", f"p:{{{tag}}}:log")


@pytest.mark.services
def test_a_one_second_ttl_is_renewed_by_a_read(settings):
    prefix = f"agentkb:test:{uuid.uuid4().hex[:12]}:"
    tracker = RedisTracker.from_url(settings.REDIS_URL, ttl=1, prefix=prefix)
    try:
        tracker.mark_retrieved("s1", "api", "a.md")
        for key in tracker.keys("s1"):
            tracker.client.persist(key)
        assert tracker.snapshot("s1").domains == {"api": ["a.md"]}
        assert [tracker.client.ttl(key) for key in tracker.keys("s1")] == [1, 1]
    finally:
        tracker.client.delete(*tracker.keys("s1"), tracker.agent_index_key("s1"))
