"""Indexing when its parts fail (service-backed run: MariaDB, Redis, the milvus-lite server and
real Celery workers): the broker down at upload, a worker killed in the middle of a task.

Nothing may be lost (every upload ends INDEXED once things are back) and nothing left behind
(Milvus holds exactly the chunk rows' vectors: no duplicates, no orphans).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from knowledge.embeddings import get_embedder
from knowledge.models import ApiDocument
from knowledge.services.documents import document_ingest
from knowledge.vectorstore import ChunkVector
from tests.conftest import REPO, free_port, stop_process
from tests.knowledge.test_indexing_worker import wait_until_settled
from tests.knowledge.test_ingestion import chunk_ids, markdown

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _use_broker(url: str) -> None:
    """Point this process's Celery app at ``url``. Its connection and producer pools live in
    kombu's process-wide registry, keyed by URL: forgetting the app's references is enough (and
    closing them would break every later test that queues to the original broker)."""
    from config.celery import app

    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None


@contextlib.contextmanager
def broker_at(url: str):
    from config.celery import app

    previous = app.conf.broker_url
    _use_broker(url)
    try:
        yield
    finally:
        _use_broker(previous)


def test_broker_down_at_upload_the_document_waits_pending_and_requeue_indexes_it_once_back(
    vector_store, celery_worker
):
    # Given the broker does not answer when a document is uploaded
    with broker_at(f"redis://127.0.0.1:{free_port()}/0"):
        result = document_ingest(data=markdown("支付失败排查手册", 3), name="payment/handbook.md")
        document = ApiDocument.objects.get(pk=result.document.pk)
        # Then the upload is saved, PENDING, and nothing reached the worker
        assert document.status == ApiDocument.Status.PENDING
        # And a sweep while the broker is still down says so and leaves it PENDING
        with pytest.raises(CommandError, match="broker refused 1 documents"):
            call_command("requeue_pending", "--older-than", "0")
        document.refresh_from_db()
        assert document.status == ApiDocument.Status.PENDING

    assert vector_store.count() == 0

    # When the broker is back and an operator (or beat's sweep) requeues pending documents
    call_command("requeue_pending", "--older-than", "0")

    # Then the real worker indexes it: nothing lost
    wait_until_settled(timeout=120)
    document.refresh_from_db()
    assert document.status == ApiDocument.Status.INDEXED, celery_worker.log_path.read_text()
    assert vector_store.chunk_ids(doc_key=document.doc_key) == chunk_ids(document)


def _start_worker(
    *,
    queue: str,
    broker: str,
    settings,
    log_path: Path,
    extra_env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
) -> subprocess.Popen:
    """A worker in its own process group (so the whole group can be killed), as conftest's."""
    db_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": db_url,
        "CELERY_BROKER_URL": broker,
        # Short, so the killed worker's message comes back within the test; longer than the
        # indexing run, or a message still being worked on would be delivered again too.
        "CELERY_BROKER_VISIBILITY_TIMEOUT": "20",
        "MILVUS_URI": settings.MILVUS_URI,
        "MILVUS_COLLECTION": settings.MILVUS_COLLECTION,
        "AGENTKB_VAR_DIR": str(log_path.parent),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "CELERY_SUMMARIES_QUEUE": f"{queue}-summaries",
        **(extra_env or {}),
    }
    log = open(log_path, "ab")  # noqa: SIM115 - the child holds it
    start = log_path.stat().st_size
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "config",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            "1",
            "-Q",
            f"{queue},{queue}-summaries",
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            f"{queue}-{uuid.uuid4().hex[:4]}@%h",
            *extra_args,
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + 90
    while b"ready." not in log_path.read_bytes()[start:]:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            raise RuntimeError("Celery worker did not start:\n" + log_path.read_text(errors="replace"))
        time.sleep(0.2)
    return proc


def test_a_worker_killed_mid_indexing_is_redelivered_and_leaves_no_duplicate_or_orphan_vectors(
    vector_store, settings, tmp_path
):
    from config.celery import app

    # A Redis database of this test's own: a 20 s visibility timeout must not redeliver the
    # messages of other test runs sharing the machine's Redis.
    broker = "redis://127.0.0.1:6379/11"
    queue = f"test-kill-{uuid.uuid4().hex[:8]}"
    log_path = tmp_path / "workers.log"
    log_path.touch()
    embedder = get_embedder()
    vector_store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    # Leftovers of an earlier crashed run of the same document: the redelivered run must remove them.
    leftover = ChunkVector(
        "payment/big.md#900", [1.0] + [0.0] * (embedder.dim - 1), "payment", "payment/big.md", 900
    )
    vector_store.upsert([leftover])

    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, queue
    settings.CELERY_SUMMARIES_QUEUE = f"{queue}-summaries"
    first = second = None
    try:
        with broker_at(broker):
            first = _start_worker(queue=queue, broker=broker, settings=settings, log_path=log_path)
            # Given a large document being indexed by the worker (a few seconds of embedding: long
            # enough to kill the worker mid-run, well inside the visibility timeout when run again)
            document_ingest(data=markdown("大文档", 100), name="payment/big.md")
            document = ApiDocument.objects.get(doc_key="payment/big.md")
            deadline = time.monotonic() + 60
            while ApiDocument.objects.get(pk=document.pk).status != ApiDocument.Status.INDEXING:
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.02)

            # When the whole worker (parent and pool child) is killed mid-task
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            document.refresh_from_db()
            assert document.status == ApiDocument.Status.INDEXING, "the task finished before the kill"

            # And another worker starts
            second = _start_worker(queue=queue, broker=broker, settings=settings, log_path=log_path)

            # Then the unacknowledged message is delivered again and indexing finishes (the task
            # ends after the status: surplus vectors go once the new rows are committed)
            wait_until_settled(timeout=150)
            deadline = time.monotonic() + 60
            while "index_document" not in "".join(
                line for line in log_path.read_text().splitlines() if "succeeded" in line
            ):
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
    finally:
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    document.refresh_from_db()
    assert document.status == ApiDocument.Status.INDEXED, log_path.read_text()
    # With no duplicates and no orphans: Milvus holds exactly the chunk rows, once each
    assert vector_store.chunk_ids(doc_key=document.doc_key) == chunk_ids(document)
    assert vector_store.count(doc_key=document.doc_key) == document.chunk_count == len(chunk_ids(document))
    # And it was the same task, received by both workers
    received = re.findall(r"Task knowledge\.index_document\[([0-9a-f-]+)\] received", log_path.read_text())
    assert len(received) == 2 and len(set(received)) == 1, received


def test_a_worker_killed_mid_indexing_is_requeued_when_its_lease_lapses_and_indexed_once(
    vector_store, settings, tmp_path
):
    """The lease, not the broker: the killed worker's message would come back only after the
    visibility timeout (720 s by default, left as it is here). A new worker with beat, whose
    sweep runs every 2 s, finds the lapsed lease and the document is INDEXED once."""
    from config.celery import app

    broker = os.environ["REDIS_URL"]
    queue = f"test-lease-{uuid.uuid4().hex[:8]}"
    log_path = tmp_path / "workers.log"
    log_path.touch()
    lease = {
        "INDEX_LEASE_SECONDS": "4",
        "INDEX_LEASE_RENEW_SECONDS": "1",
        "INGEST_SWEEP_INTERVAL_SECONDS": "2",
        # the default: the killed run's message does not come back within the test
        "CELERY_BROKER_VISIBILITY_TIMEOUT": "720",
    }
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, queue
    settings.CELERY_SUMMARIES_QUEUE = f"{queue}-summaries"
    first = second = None
    try:
        first = _start_worker(
            queue=queue, broker=broker, settings=settings, log_path=log_path, extra_env=lease
        )
        # Given a large document being indexed by the worker, under a lease it renews
        document_ingest(data=markdown("大文档", 100), name="payment/big.md")
        document = ApiDocument.objects.get(doc_key="payment/big.md")
        deadline = time.monotonic() + 60
        while ApiDocument.objects.get(pk=document.pk).status != ApiDocument.Status.INDEXING:
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.02)

        # When the whole worker (parent and pool child) is killed mid-task
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        killed = time.monotonic()
        document.refresh_from_db()
        assert document.status == ApiDocument.Status.INDEXING, "the task finished before the kill"
        assert document.index_lease_until is not None

        # And a new worker starts, with beat
        second = _start_worker(
            queue=queue,
            broker=broker,
            settings=settings,
            log_path=log_path,
            extra_env=lease,
            extra_args=("--beat", "--schedule", str(tmp_path / "beat-schedule")),
        )
        started = time.monotonic()

        # Then the document is INDEXED within the lease, a sweep interval and one run (generous
        # bounds: the machine is shared)
        deadline = time.monotonic() + 120
        while ApiDocument.objects.get(pk=document.pk).status != ApiDocument.Status.INDEXED:
            assert time.monotonic() < deadline, log_path.read_text()[-6000:]
            time.sleep(0.2)
        indexed = time.monotonic()
        # (the task ends after the status: surplus vectors go once the new rows are committed)
        deadline = time.monotonic() + 60
        while not re.search(r"Task knowledge\.index_document\[[0-9a-f-]+\] succeeded", log_path.read_text()):
            assert time.monotonic() < deadline, log_path.read_text()[-6000:]
            time.sleep(0.2)
        print(
            f"INDEXED {indexed - killed:.1f} s after the kill, "
            f"{indexed - started:.1f} s after the new worker was ready"
        )
    finally:
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    # With nothing lost or duplicated: Milvus holds exactly the chunk rows, once each
    document.refresh_from_db()
    assert vector_store.chunk_ids(doc_key=document.doc_key) == chunk_ids(document)
    assert vector_store.count(doc_key=document.doc_key) == document.chunk_count == len(chunk_ids(document))
    # And one run finished it: the sweep's (the killed run's message was not delivered again)
    log = log_path.read_text()
    received = re.findall(r"Task knowledge\.index_document\[([0-9a-f-]+)\] received", log)
    succeeded = re.findall(r"Task knowledge\.index_document\[([0-9a-f-]+)\] succeeded", log)
    assert len(received) == 2 and len(set(received)) == 2, received
    assert succeeded == received[1:], (received, succeeded)
