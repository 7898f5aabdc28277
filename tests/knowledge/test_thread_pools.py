"""The thread pools of an indexing run work in a forked child whose parent had started them (a
Celery prefork worker, a gunicorn worker): the parent's threads are gone there."""

from __future__ import annotations

import os
import threading

from knowledge.thread_pools import ProcessThreadPool


def test_a_pool_started_before_a_fork_runs_work_in_the_child():
    pool = ProcessThreadPool(max_workers=1, thread_name_prefix="test-pool")
    assert pool.submit(threading.current_thread).result(timeout=10).name.startswith("test-pool")

    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: the parent's thread is not here
        try:
            answer = pool.submit(lambda: os.getpid()).result(timeout=10)
            os.write(write, str(answer).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        got = os.read(read, 64).decode()
    finally:
        os.close(read)
        os.waitpid(child, 0)

    assert got == str(child)
    assert pool.submit(lambda: 42).result(timeout=10) == 42  # the parent's pool goes on
