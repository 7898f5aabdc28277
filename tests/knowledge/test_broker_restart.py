"""A real Celery worker outlives its Redis broker going away and coming back (service-backed run).

Redis restarted under a running worker (an upgrade, a crash, a failover) must cost the queue a few
seconds, not the worker: the worker reconnects and takes the next task. (Celery 5.7.0 ended the
worker instead: "Unrecoverable error: AttributeError ... 'hostname'" while it closed the lost
connection; the project pins below it.)
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from bench.processes import redis_argv
from config.celery import app
from tests.conftest import free_port, wait_for_port

pytestmark = pytest.mark.services


class RedisServer:
    """A redis-server of this test alone, restarted on the same port."""

    def __init__(self, folder) -> None:
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            redis_argv(self.folder, self.port),
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture
def own_broker(tmp_path, monkeypatch):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer(tmp_path)
    server.start()
    monkeypatch.setenv("CELERY_BROKER_URL", server.url)  # for the worker the fixture starts
    try:
        yield server
    finally:
        server.stop()


def _send(url: str, queue: str, **options) -> str:
    with app.connection_for_write(url) as connection:
        result = app.send_task(
            "knowledge.pending_documents_requeue", connection=connection, queue=queue, **options
        )
    return result.id


def _wait_for(log, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
        time.sleep(0.2)


@pytest.mark.django_db(transaction=True)
def test_the_worker_outlives_its_broker_restarting_and_takes_the_next_task(own_broker, request):
    # Given a real worker on a Redis broker of this test, working
    worker = request.getfixturevalue("celery_worker")
    queue = app.conf.task_default_queue
    first = _send(own_broker.url, queue)
    _wait_for(worker.log_path, f"[{first}] succeeded", timeout=30)
    # and holding a message it has not acknowledged (a task due later: the worker keeps it
    # unacknowledged until it runs it, as it does its prefetched messages)
    held = _send(own_broker.url, queue, countdown=300)
    _wait_for(worker.log_path, f"[{held}] received", timeout=30)

    # When Redis stops for a few seconds and starts again on the same port (empty, as it keeps
    # nothing on disk)
    own_broker.stop()
    _wait_for(worker.log_path, "Connection to broker lost", timeout=30)
    time.sleep(3)
    own_broker.start()

    # Then the worker is still running, and takes a task sent after the restart
    second = _send(own_broker.url, queue)
    _wait_for(worker.log_path, f"[{second}] succeeded", timeout=60)
    assert worker.poll() is None, worker.log_path.read_text(errors="replace")[-4000:]
    assert "Unrecoverable error" not in worker.log_path.read_text(errors="replace")
