"""Shared fixtures.

Two modes, chosen by the environment:
- embedded default (nothing set): SQLite, embedded milvus-lite in a temp folder, eager Celery;
- service-backed (DATABASE_URL=mysql://... and REDIS_URL set, as `.ci/run` does): MariaDB, Redis,
  a loopback `milvus-lite server`, and a real Celery worker process for tests that ask for one.
  With MILVUS_URI set to a server (http://...), the tests use that server instead (Milvus 2.3.5
  standalone in `.ci/run`: scripts/milvus_standalone.py).
Tests marked ``services`` are skipped, with the reason printed, in the embedded mode.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SERVICES_MODE = os.environ.get("DATABASE_URL", "").startswith("mysql") and bool(os.environ.get("REDIS_URL"))
SKIP_SERVICES_REASON = (
    "service-backed test: set DATABASE_URL=mysql://root@127.0.0.1:3306/test and "
    "REDIS_URL=redis://127.0.0.1:6379/0 (as .ci/run does) to run it"
)


def pytest_report_header(config):
    mode = "service-backed (MariaDB + Redis + Celery worker)" if SERVICES_MODE else "embedded default"
    return f"agentkb test mode: {mode}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        # ``-m vectors`` selects every test that writes or searches a Milvus collection (the run
        # .ci/run repeats on Milvus 2.3.5 standalone).
        if "vector_store" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.vectors)
    if SERVICES_MODE:
        return
    skip = pytest.mark.skip(reason=SKIP_SERVICES_REASON)
    for item in items:
        if "services" in item.keywords:
            item.add_marker(skip)


def free_port() -> int:
    """A free loopback port: the system's choice, or one from AGENTKB_TEST_PORTS (``24000-24999``)
    when set, so test runs sharing a machine keep to ranges of their own."""
    span = os.environ.get("AGENTKB_TEST_PORTS", "").strip()
    candidates = [0]
    if span:
        low, _, high = span.partition("-")
        candidates = random.sample(range(int(low), int(high) + 1), k=int(high) - int(low) + 1)
    for candidate in candidates:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError(f"no free port in AGENTKB_TEST_PORTS={span}")


def wait_for_port(port: int, *, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def stop_process(proc: subprocess.Popen, *, timeout: float = 15.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(autouse=True)
def _no_corpus_watcher(settings):
    """No test shares SQLite with the corpus watcher thread an earlier test's lookup started.

    Tests run on an in-memory SQLite database in shared-cache mode, where a read by another
    connection locks the table for a moment and a write meeting it fails at once ("database
    table is locked"), not after a busy wait. The watcher reads the documents every
    ``RETRIEVAL_INDEX_REFRESH_MS`` (1 s by default), so any test writing documents could lose
    that race. With the interval 0 the watcher exits at its next wake-up (joined here) and
    lookups read the signature in their own thread; a test of the watcher sets an interval itself.
    """
    from retrieval.lookup.corpus import _watcher, corpus_signature_forget

    settings.RETRIEVAL_INDEX_REFRESH_MS = 0
    thread = _watcher.thread
    if thread is not None and thread.is_alive():
        thread.join(timeout=10)
    corpus_signature_forget()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """A loopback `milvus-lite server` for this test session: what web and worker share."""
    data_dir = tmp_path_factory.mktemp("milvus-server")
    port = free_port()
    log = open(data_dir / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "milvus-lite"),
            "server",
            "--data-dir",
            str(data_dir / "data"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, proc=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)
        log.close()


@pytest.fixture(scope="session", autouse=True)
def _vector_store_location(request):
    """Embedded mode: milvus-lite file in the test var folder. Service mode: the shared server."""
    from django.conf import settings

    from knowledge.vectorstore import reset_vector_store

    # MILVUS_URI naming a server (Milvus standalone, as `.ci/run` starts it): every test runs there.
    external = os.environ.get("MILVUS_URI", "")
    if external.startswith(("http://", "https://")):
        settings.MILVUS_URI = external
    elif SERVICES_MODE:
        settings.MILVUS_URI = request.getfixturevalue("milvus_server")
    reset_vector_store()
    yield
    reset_vector_store()


@pytest.fixture(scope="session")
def _collection_pool(_vector_store_location):
    """On a Milvus server (not milvus-lite): emptied, loaded collections the ``vector_store``
    fixture hands from test to test (tests/support/collection_pool.py). None elsewhere."""
    from django.conf import settings

    from knowledge.vectorstore import VectorStore
    from tests.support.collection_pool import CollectionPool

    probe = VectorStore(uri=settings.MILVUS_URI, collection="unused")
    try:
        server = not probe.is_embedded and not probe.capabilities().lite
    finally:
        probe.reset()
    if not server:
        yield None
        return
    pool = CollectionPool(settings.MILVUS_URI)
    yield pool
    pool.drop_all(lambda name: VectorStore(uri=pool.uri, collection=name))


@pytest.fixture
def vector_store(settings, tmp_path_factory, monkeypatch, _collection_pool):
    """A fresh, empty Milvus collection and lexical index for one test; dropped afterwards (on a
    Milvus server: emptied and kept loaded for a later test, ``_collection_pool``)."""
    from knowledge.lexical import reset_lexical_engine
    from knowledge.vectorstore import VectorStore, get_vector_store, reset_vector_store

    settings.MILVUS_COLLECTION = f"t_{uuid.uuid4().hex[:12]}"
    settings.LEXICAL_INDEX_DIR = str(tmp_path_factory.mktemp("lexical"))
    if _collection_pool is not None:
        monkeypatch.setattr(
            VectorStore,
            "_ensure_collection",
            _collection_pool.ensure_collection_wrapper(
                VectorStore._ensure_collection, settings.MILVUS_COLLECTION
            ),
        )
    reset_vector_store()
    reset_lexical_engine()
    store = get_vector_store()
    yield store
    try:
        if _collection_pool is not None:
            _collection_pool.release(store)
        else:
            store.drop()
    finally:
        reset_vector_store()
        reset_lexical_engine()


@pytest.fixture
def milvus_bm25(settings):
    """Milvus's own BM25 as the lexical engine: the collection then carries the BM25 field and
    function, which ``hybrid_search`` and ``bm25_search`` read (on milvus-lite, ``auto`` keeps BM25
    in the tantivy index beside it). Skipped on a server without it (Milvus before 2.5)."""
    from knowledge.vectorstore import get_vector_store

    caps = get_vector_store().capabilities()
    if not (caps.bm25_function and caps.hybrid_search):
        pytest.skip(f"Milvus's own BM25 and hybrid_search: {caps.summary()}")
    settings.LEXICAL_ENGINE = "milvus"


@pytest.fixture
def celery_worker_concurrency() -> int:
    """Pool processes of the ``celery_worker`` fixture's worker; a test needing more overrides
    this fixture (``@pytest.mark.parametrize("celery_worker_concurrency", [2])``)."""
    return 1


@pytest.fixture
def celery_worker(transactional_db, settings, tmp_path, celery_worker_concurrency):
    """A real Celery worker process on the configured broker, using the test database.

    Service-backed mode only (the embedded test database is in-memory SQLite, which no other
    process can open). Tasks queued while it runs go through the broker to this process. It
    serves both queues, as the embedded setup's one worker does: indexing (this test's default
    queue) and the summaries (this test's summaries queue).
    """
    if not SERVICES_MODE:
        pytest.skip(SKIP_SERVICES_REASON)
    from django.db import connection

    from config.celery import app

    db_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    queue = f"test-{uuid.uuid4().hex[:8]}"
    summaries_queue = f"{queue}-summaries"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": db_url,
        "MILVUS_URI": settings.MILVUS_URI,
        "MILVUS_COLLECTION": settings.MILVUS_COLLECTION,
        "LEXICAL_INDEX_DIR": settings.LEXICAL_INDEX_DIR,
        "AGENTKB_VAR_DIR": os.environ.get("AGENTKB_VAR_DIR", str(tmp_path)),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "CELERY_SUMMARIES_QUEUE": summaries_queue,
    }
    log_path = tmp_path / "worker.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "config",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            str(celery_worker_concurrency),
            "--pool",
            "prefork",
            "-Q",
            f"{queue},{summaries_queue}",
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            f"{queue}@%h",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue
    settings.CELERY_SUMMARIES_QUEUE = summaries_queue  # read by the router at each send
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log_path.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Celery worker did not start:\n" + log_path.read_text(errors="replace"))
            time.sleep(0.2)
        proc.log_path = log_path
        yield proc
    finally:
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        stop_process(proc, timeout=30)
        log.close()


@pytest.fixture
def fake_openai():
    """A local HTTP server speaking the OpenAI chat-completions protocol (the test LLM), on
    127.0.0.1 and a free port; scripted and inspected through tests/support/fake_openai.py."""
    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        yield server
