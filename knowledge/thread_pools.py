"""Thread pools an indexing run hands work to, one per process.

A pool is made on first use in the process that uses it. A forked child (a Celery prefork worker,
a gunicorn worker) makes its own: the parent's threads do not survive the fork, and a pool that
still counted them would take work and never run it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class ProcessThreadPool:
    def __init__(self, *, max_workers: int, thread_name_prefix: str) -> None:
        self.max_workers = max_workers
        self.thread_name_prefix = thread_name_prefix
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return self._made().submit(fn, *args, **kwargs)

    def _made(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        max_workers=self.max_workers, thread_name_prefix=self.thread_name_prefix
                    )
        return self._pool

    def _forget(self) -> None:
        self._pool = None
        self._lock = threading.Lock()
