"""The action memory's rules that the FS-3 tests leave open: when the in-process store expires and
sweeps sessions (on a clock the test moves), what a read leaves behind, the interface every store
must implement, and which store a process gets."""

from __future__ import annotations

import dataclasses

import pytest

from retrieval.agents.tracker import (
    MemoryTracker,
    RedisTracker,
    RetrievedDocTracker,
    SessionRetrievals,
    fallback_tracker,
    get_tracker,
    reset_tracker,
    tracker_backend,
)
from retrieval.agents.tracker import memory as memory_module


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock(1000.0)
    monkeypatch.setattr(memory_module.time, "monotonic", clock)
    return clock


@pytest.fixture
def fresh_trackers():
    reset_tracker()
    yield
    reset_tracker()


# --- expiry and the sweep --------------------------------------------------------------------------
def test_a_session_idle_for_exactly_the_ttl_is_kept_and_one_idle_longer_is_forgotten(clock):
    tracker = MemoryTracker(ttl=10)
    tracker.mark_retrieved("s1", "api", "a.md")
    clock.now += 10
    assert tracker.is_doc_retrieved("s1", "a.md") is True  # reading it renews it
    clock.now += 10.5
    assert tracker.is_doc_retrieved("s1", "a.md") is False


def test_idle_sessions_are_swept_once_a_minute_by_whichever_call_comes_next(clock):
    # Given a tracker (last swept at 1000.0) with a session touched at 1000.0 and ttl 10
    tracker = MemoryTracker(ttl=10)
    tracker.mark_retrieved("idle", "api", "a.md")

    # When other sessions are used before a minute has passed since the last sweep
    clock.now = 1011.0
    tracker.mark_retrieved("active", "api", "b.md")
    clock.now = 1050.5
    tracker.mark_retrieved("edge", "api", "c.md")  # will be idle exactly the ttl at the sweep
    # Then the idle session (expired, never read again) is still held
    assert tracker.session_count() == 3
    # Nor is it swept at exactly one minute
    clock.now = 1060.0
    tracker.mark_retrieved("active", "api", "b.md")
    assert tracker.session_count() == 3

    # When a call comes more than a minute after the last sweep
    clock.now = 1060.5
    tracker.mark_retrieved("third", "api", "d.md")

    # Then only the sessions idle longer than the ttl went; recent ones and the new one stay
    assert tracker.session_count() == 3
    assert tracker.snapshot("active").doc_keys == {"b.md"}
    assert tracker.snapshot("edge").doc_keys == {"c.md"}
    assert tracker.snapshot("third").doc_keys == {"d.md"}

    # And the next sweep is a minute after this one
    clock.now = 1100.0
    tracker.mark_retrieved("fourth", "api", "e.md")
    assert tracker.session_count() == 4


def test_with_a_ttl_of_zero_the_sweep_keeps_every_session(clock):
    """TTL <= 0 is "never expire" (as in Redis): a day later, after sweeps, the session holds all."""
    tracker = MemoryTracker(ttl=0)
    tracker.mark_retrieved("old", "api", "a.md")
    clock.now += 86400
    tracker.mark_retrieved("new", "api", "b.md")  # a call after a minute: sweeps
    assert tracker.session_count() == 2
    assert tracker.snapshot("old").doc_keys == {"a.md"}


def test_reading_an_unknown_session_does_not_create_it():
    tracker = MemoryTracker(ttl=3600)
    assert tracker.snapshot("nobody") == SessionRetrievals()
    assert tracker.is_doc_retrieved("nobody", "a.md") is False
    assert tracker.session_count() == 0


def test_a_snapshot_is_a_value_the_lookup_cannot_change():
    tracker = MemoryTracker(ttl=3600)
    tracker.mark_retrieved("s1", "api", "a.md")
    snapshot = tracker.snapshot("s1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.domains = {}
    snapshot.domains["api"].append("b.md")  # a copy: the store is untouched
    assert tracker.snapshot("s1").domains == {"api": ["a.md"]}


# --- the interface -------------------------------------------------------------------------------
@pytest.mark.parametrize("missing", ["mark_many", "snapshot", "clear_session"])
def test_a_store_must_implement_every_primitive(missing):
    def implemented(self, *args):
        return None

    methods = {name: implemented for name in ("mark_many", "snapshot", "clear_session") if name != missing}
    incomplete = type("Incomplete", (RetrievedDocTracker,), methods)
    with pytest.raises(TypeError, match=missing):
        incomplete()


# --- which store a process gets -------------------------------------------------------------------
def test_the_memory_backend_needs_no_redis_url(settings):
    settings.RETRIEVAL_TRACKER_BACKEND = "memory"
    settings.REDIS_URL = ""
    assert tracker_backend() == "memory"


def test_the_redis_backend_named_explicitly_gives_the_redis_store(settings, fresh_trackers):
    settings.RETRIEVAL_TRACKER_BACKEND = " Redis "
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens: the client connects on first use only
    settings.RETRIEVAL_SESSION_TTL = 1234
    store = get_tracker()
    assert isinstance(store, RedisTracker)
    assert store.ttl == 1234
    assert get_tracker() is store


def test_the_memory_store_takes_the_session_ttl_and_is_one_per_process(settings, fresh_trackers):
    settings.RETRIEVAL_TRACKER_BACKEND = "memory"
    settings.RETRIEVAL_SESSION_TTL = 99
    store = get_tracker()
    assert isinstance(store, MemoryTracker) and store.ttl == 99
    assert get_tracker() is store


def test_the_fallback_store_is_one_in_process_memory_until_reset(settings, fresh_trackers):
    settings.RETRIEVAL_SESSION_TTL = 77
    fallback = fallback_tracker()
    assert isinstance(fallback, MemoryTracker) and fallback.ttl == 77
    assert fallback_tracker() is fallback
    reset_tracker()
    assert fallback_tracker() is not fallback
