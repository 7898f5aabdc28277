"""FS-3: the two-level action memory, on both stores (in-process always; Redis service-backed)."""

import subprocess
import sys
import threading
import time
import uuid

import pytest

from retrieval.agents.tracker import MemoryTracker, RedisTracker, get_tracker, reset_tracker, tracker_backend
from tests.conftest import REPO


@pytest.fixture
def redis_prefix():
    return f"agentkb:test:{uuid.uuid4().hex[:12]}:"


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.services)])
def tracker(request, settings, redis_prefix):
    if request.param == "memory":
        yield MemoryTracker(ttl=3600)
        return
    store = RedisTracker.from_url(settings.REDIS_URL, ttl=3600, prefix=redis_prefix)
    yield store
    keys = list(store.client.scan_iter(match=f"{redis_prefix}*"))
    if keys:
        store.client.delete(*keys)


# --- the acceptance criteria ---------------------------------------------------------------------
def test_fs3_after_marking_the_doc_is_retrieved(tracker):
    tracker.mark_retrieved("s1", "infrastructure", "a.md")
    assert tracker.is_doc_retrieved("s1", "a.md") is True
    assert tracker.is_doc_retrieved("s1", "b.md") is False


def test_fs3_after_marking_the_domain_is_retrieved(tracker):
    tracker.mark_retrieved("s1", "infrastructure", "a.md")
    assert tracker.is_domain_retrieved("s1", "infrastructure") is True
    assert tracker.is_domain_retrieved("s1", "api") is False


def test_fs3_after_marking_the_domain_list_holds_it(tracker):
    tracker.mark_retrieved("s1", "infrastructure", "a.md")
    assert tracker.get_retrieved_domains("s1") == ["infrastructure"]


def test_fs3_domains_come_back_in_first_retrieved_order(tracker):
    tracker.mark_retrieved("s1", "infrastructure", "a.md")
    tracker.mark_retrieved("s1", "api", "b.md")
    tracker.mark_retrieved("s1", "infrastructure", "c.md")
    assert tracker.get_retrieved_domains("s1") == ["infrastructure", "api"]
    assert tracker.snapshot("s1").domains == {"infrastructure": ["a.md", "c.md"], "api": ["b.md"]}


def test_fs3_clear_session_forgets_everything(tracker):
    tracker.mark_retrieved("s1", "infrastructure", "a.md")
    tracker.mark_retrieved("s2", "api", "b.md")
    tracker.clear_session("s1")
    assert tracker.is_doc_retrieved("s1", "a.md") is False
    assert tracker.is_domain_retrieved("s1", "infrastructure") is False
    assert tracker.get_retrieved_domains("s1") == []
    assert tracker.is_already_retrieved("s1", "a.md") is False
    # Other sessions are untouched.
    assert tracker.get_retrieved_domains("s2") == ["api"]


def test_fs3_is_already_retrieved_keeps_its_meaning(tracker):
    tracker.mark_retrieved("s1", "infrastructure", "a.md")
    assert tracker.is_already_retrieved("s1", "a.md") is True
    assert tracker.is_already_retrieved("s1", "b.md") is False
    assert tracker.is_already_retrieved("other", "a.md") is False


def test_fs3_concurrent_marks_from_many_threads_lose_nothing(tracker):
    def worker(n):
        for i in range(100):
            tracker.mark_retrieved("s1", f"domain-{i % 5}", f"t{n}-{i}.md")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snapshot = tracker.snapshot("s1")
    assert len(snapshot.doc_keys) == 800
    assert sorted(snapshot.domain_list) == [f"domain-{i}" for i in range(5)]


def test_mark_many_returns_the_domains_afterwards(tracker):
    tracker.mark_retrieved("s1", "api", "x.md")
    assert tracker.mark_many("s1", [("infrastructure", "a.md"), ("api", "b.md")]) == ["api", "infrastructure"]


# --- expiry ----------------------------------------------------------------------------------------
def test_memory_store_forgets_idle_sessions():
    tracker = MemoryTracker(ttl=0.05)
    tracker.mark_retrieved("s1", "api", "a.md")
    assert tracker.is_doc_retrieved("s1", "a.md")
    time.sleep(0.1)
    assert tracker.get_retrieved_domains("s1") == []


@pytest.mark.parametrize("ttl", [0, -1])
@pytest.mark.parametrize("backend", ["memory", pytest.param("redis", marks=pytest.mark.services)])
def test_a_ttl_of_zero_or_less_keeps_sessions_in_both_stores(settings, redis_prefix, backend, ttl):
    """RETRIEVAL_SESSION_TTL <= 0 means "never expire" in both stores (Redis keeps keys without
    an expiry): the session still holds what it was given, so nothing is handed over twice."""
    if backend == "memory":
        tracker = MemoryTracker(ttl=ttl)
    else:
        tracker = RedisTracker.from_url(settings.REDIS_URL, ttl=ttl, prefix=redis_prefix)
    tracker.mark_retrieved("s1", "api", "a.md")
    time.sleep(0.05)
    assert tracker.is_doc_retrieved("s1", "a.md")
    assert tracker.get_retrieved_domains("s1") == ["api"]
    if backend == "redis":
        assert all(tracker.client.ttl(k) == -1 for k in tracker.keys("s1"))  # no expiry set
        tracker.client.delete(*tracker.keys("s1"), tracker.agent_index_key("s1"))


@pytest.mark.services
def test_redis_sessions_expire_when_idle_and_each_use_renews_them(settings, redis_prefix):
    tracker = RedisTracker.from_url(settings.REDIS_URL, ttl=100, prefix=redis_prefix)
    tracker.mark_retrieved("s1", "api", "a.md")
    keys = tracker.keys("s1")
    assert all(0 < tracker.client.ttl(k) <= 100 for k in keys)
    for key in keys:
        tracker.client.expire(key, 5)
    tracker.snapshot("s1")  # a lookup reads the session: it is not idle
    assert all(tracker.client.ttl(k) > 5 for k in keys)
    tracker.client.delete(*keys)


@pytest.mark.services
def test_two_processes_marking_one_session_through_redis_lose_nothing(settings, redis_prefix):
    script = (
        "import sys, time\n"
        "from retrieval.agents.tracker.redis import RedisTracker\n"
        "url, prefix, who, start = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])\n"
        "t = RedisTracker.from_url(url, ttl=600, prefix=prefix)\n"
        "while time.time() < start: time.sleep(0.001)\n"
        "began = time.time()\n"
        "for i in range(0, 400, 2):\n"
        "    t.mark_many('shared', [(f'domain-{i % 7}', f'{who}-{i}.md'), (f'domain-{(i + 1) % 7}', f'{who}-{i + 1}.md')])\n"
        "print(began, time.time())\n"
    )
    start = str(time.time() + 1.5)  # both processes start marking at the same moment
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, settings.REDIS_URL, redis_prefix, who, start],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("p1", "p2")
    ]
    spans = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        spans.append([float(x) for x in out.split()])
    # The two processes really marked at the same time.
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], spans
    tracker = RedisTracker.from_url(settings.REDIS_URL, ttl=600, prefix=redis_prefix)
    snapshot = tracker.snapshot("shared")
    assert snapshot.doc_keys == {f"{who}-{i}.md" for who in ("p1", "p2") for i in range(400)}
    assert sorted(snapshot.domain_list) == [f"domain-{i}" for i in range(7)]
    assert len(snapshot.domain_list) == 7  # each domain once, in first-retrieved order
    for domain, docs in snapshot.domains.items():
        assert all(int(d.split("-")[1].removesuffix(".md")) % 7 == int(domain[-1]) for d in docs)
    tracker.client.delete(*tracker.keys("shared"), tracker.agent_index_key("shared"))


# --- choosing the store ----------------------------------------------------------------------------
def test_backend_follows_redis_url_unless_set(settings):
    settings.RETRIEVAL_TRACKER_BACKEND = ""
    settings.REDIS_URL = ""
    assert tracker_backend() == "memory"
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert tracker_backend() == "redis"
    settings.RETRIEVAL_TRACKER_BACKEND = "memory"
    assert tracker_backend() == "memory"
    reset_tracker()
    assert isinstance(get_tracker(), MemoryTracker)


def test_a_bad_backend_is_refused_naming_the_setting(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.RETRIEVAL_TRACKER_BACKEND = "memcached"
    with pytest.raises(ImproperlyConfigured, match="RETRIEVAL_TRACKER_BACKEND"):
        tracker_backend()
    settings.RETRIEVAL_TRACKER_BACKEND = "redis"
    settings.REDIS_URL = ""
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        tracker_backend()
