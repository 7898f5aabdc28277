"""Deadlines and the circuit breaker: a dependency that accepts connections and never answers
costs one deadline, then calls fail at once until the cooldown ends."""

from __future__ import annotations

import time

import pytest

from config.breaker import CircuitBreaker, CircuitOpen
from knowledge.vectorstore import VectorStore, VectorStoreError
from retrieval.agents.tracker import TrackerUnavailable
from retrieval.agents.tracker.redis import RedisTracker
from tests.support.hung_peer import HungPeer


@pytest.fixture
def hung_peer():
    peer = HungPeer()
    yield peer
    peer.close()


def _hung_store(peer: HungPeer, *, timeout: float, read_timeout: float = 1.0) -> VectorStore:
    """A store on a peer that accepts connections and never answers (a hung Milvus)."""
    return VectorStore(
        uri=f"http://127.0.0.1:{peer.port}",
        collection="c",
        timeout=timeout,
        read_timeout=read_timeout,
        breaker_seconds=30,
    )


def test_breaker_opens_after_a_failure_and_lets_a_call_through_after_the_cooldown():
    breaker = CircuitBreaker("thing", cooldown=0.3)
    breaker.check()  # closed: nothing raised
    breaker.failed(TimeoutError("no answer"))
    with pytest.raises(CircuitOpen, match=r"thing failed .*no answer.*not asked again"):
        breaker.check()
    time.sleep(0.35)
    breaker.check()  # half-open: the next call is let through
    breaker.failed("again")
    assert breaker.is_open
    breaker.succeeded()
    assert not breaker.is_open


def test_a_hung_milvus_costs_one_deadline_then_fails_at_once(hung_peer):
    store = _hung_store(hung_peer, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(VectorStoreError):
        store.ping()
    first = time.monotonic() - started
    # connecting (the client's own deadline) plus at most one call's; never the OS's TCP timeout
    assert first < 5, first

    started = time.monotonic()
    with pytest.raises(VectorStoreError, match=r"not attempted.*not asked again"):
        store.count()
    with pytest.raises(VectorStoreError, match="not attempted"):
        store.count()
    assert time.monotonic() - started < 0.5
    assert store.guard.breaker.is_open
    # The health check's ping is a probe: it asks even now (so /healthz sees a server come
    # back at once), and a failed probe keeps the breaker open.
    with pytest.raises(VectorStoreError) as probed:
        store.ping()
    assert "not attempted" not in str(probed.value)
    assert store.guard.breaker.is_open


def test_a_lookups_read_that_connects_to_a_hung_milvus_waits_its_read_deadline_not_the_write_one(hung_peer):
    # Given a store whose connection is new (as after a restart of Milvus made it reconnect),
    # with a long deadline for writes and a short one for the lookup's reads
    store = _hung_store(hung_peer, timeout=20.0)
    # When a lookup's read finds the server hung (it connects, then nothing answers)
    started = time.monotonic()
    with pytest.raises(VectorStoreError):
        store.ping()
    # Then it costs about the read deadline (the connection within it too), not the writes' 20 s
    assert time.monotonic() - started < 6


def test_the_stored_vectors_a_lookup_fetches_wait_its_read_deadline_not_the_write_one(hung_peer):
    # Given a store with a long deadline for writes and a short one for the lookup's reads
    store = _hung_store(hung_peer, timeout=20.0)
    # When a lookup fetches the vectors of chunks only BM25 found, from a Milvus that hangs
    started = time.monotonic()
    with pytest.raises(VectorStoreError):
        store.vectors(["a.md#0"], for_read=True)
    # Then it costs about the read deadline (a hung Milvus held such lookups 10 s)
    assert time.monotonic() - started < 6


def test_a_hung_redis_action_memory_costs_one_socket_timeout_then_fails_at_once(hung_peer):
    tracker = RedisTracker.from_url(f"redis://127.0.0.1:{hung_peer.port}/0", ttl=60, breaker_seconds=30)
    started = time.monotonic()
    with pytest.raises(TrackerUnavailable):
        tracker.snapshot("s-1")
    assert time.monotonic() - started < 5
    started = time.monotonic()
    for _ in range(5):
        with pytest.raises(TrackerUnavailable, match="not asked again"):
            tracker.mark_many("s-1", [("d", "d/a.md")])
    assert time.monotonic() - started < 0.5


def test_the_budget_counter_fails_at_once_once_the_action_memory_has_waited_on_the_same_redis(
    hung_peer, settings
):
    # Given the action memory and the budget counter on one Redis that accepts and never answers
    from retrieval.agents.budget_windows import Rate, RedisWindow
    from retrieval.agents.throttling import budget_window_reset
    from tests.support.redis_settings import redis_point_at

    url = f"redis://127.0.0.1:{hung_peer.port}/0"
    redis_point_at(settings, url, timeout=1)
    budget_window_reset()
    try:
        tracker = RedisTracker.from_url(url, ttl=60, breaker_seconds=30)
        # When the action memory waits out its socket timeout once
        with pytest.raises(TrackerUnavailable):
            tracker.snapshot("s-1")
        # Then the budget counter on that server does not wait out its own: one server, one
        # breaker, so a lookup pays one timeout, not one per client
        started = time.monotonic()
        assert (
            RedisWindow().spend([("agent-1", Rate(calls=10, window_s=60))]) is None
        )  # let through uncounted
        assert time.monotonic() - started < 0.5
        assert hung_peer.accepted == 1
    finally:
        budget_window_reset()


def test_a_hung_database_costs_one_connect_timeout_then_connections_fail_at_once(hung_peer, settings):
    driver = pytest.importorskip("MySQLdb")  # the MySQL/MariaDB driver (mysqlclient); no server needed
    from config.breaker import shared_breakers_reset
    from config.db.mysql.base import DatabaseWrapper

    # Given a MariaDB that accepts connections and never answers (its handshake never comes)
    shared_breakers_reset()
    wrapper = DatabaseWrapper(
        {
            "ENGINE": "config.db.mysql",
            "NAME": "agentkb",
            "USER": "root",
            "PASSWORD": "",
            "HOST": "127.0.0.1",
            "PORT": hung_peer.port,
            "OPTIONS": {"connect_timeout": 1},
            "TIME_ZONE": None,
            "CONN_MAX_AGE": 0,
            "CONN_HEALTH_CHECKS": False,
            "AUTOCOMMIT": True,
            "ATOMIC_REQUESTS": False,
            "TEST": {},
        }
    )
    try:
        # When a connection is attempted: it costs the connect timeout once
        # (Django's ensure_connection calls get_new_connection; the test database guard forbids
        # the former here)
        params = wrapper.get_connection_params()
        started = time.monotonic()
        with pytest.raises(driver.OperationalError):
            wrapper.get_new_connection(params)
        assert 0.5 < time.monotonic() - started < 5
        # Then the next attempts fail at once with the driver's error class (which the API
        # answers as its JSON 503 naming the database), the server not asked again
        started = time.monotonic()
        for _ in range(5):
            with pytest.raises(driver.OperationalError, match="not attempted"):
                wrapper.get_new_connection(params)
        assert time.monotonic() - started < 0.5
        assert hung_peer.accepted == 1
    finally:
        shared_breakers_reset()
