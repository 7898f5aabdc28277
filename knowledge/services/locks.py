"""A per-document lock so two indexing runs of one document never interleave.

Two runs can meet: a re-upload queues a new task while the previous one still runs, and a
redelivered task can overlap a slow one. Interleaved, one run's stale-vector cleanup could delete
the other's fresh vectors. MySQL/MariaDB: ``GET_LOCK`` (shared by every worker on every host).
Otherwise (the embedded default, one machine): an ``flock`` on a file under ``AGENTKB_VAR_DIR``.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator

from django.db import connection

from config.env import VAR_DIR


class LockTimeout(Exception):
    """Another run held the document's lock for longer than we were willing to wait."""


@contextlib.contextmanager
def document_lock(*, document_id: int, timeout: float = 600.0) -> Iterator[None]:
    if connection.vendor == "mysql":
        name = f"agentkb:index:{document_id}"
        with connection.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, %s)", [name, int(timeout)])
            (got,) = cursor.fetchone()
        if got != 1:
            raise LockTimeout(f"document {document_id} is being indexed by another run")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT RELEASE_LOCK(%s)", [name])
        return

    folder = VAR_DIR / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"index-{document_id}.lock", "a+") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout(f"document {document_id} is being indexed by another run") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
