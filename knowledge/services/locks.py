"""A per-document lock so two indexing runs of one document never interleave.

Two runs can meet: a re-upload queues a new task while the previous one still runs, and a
redelivered task can overlap a slow one. Interleaved, one run's stale-vector cleanup could delete
the other's fresh vectors. MySQL/MariaDB: ``GET_LOCK`` (shared by every worker on every host).
Otherwise (the embedded default, one machine): an ``flock`` on a file under ``AGENTKB_VAR_DIR``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connection

from config.env import VAR_DIR
from config.file_locks import file_lock


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

    def busy() -> LockTimeout:
        return LockTimeout(f"document {document_id} is being indexed by another run")

    with file_lock(VAR_DIR / "locks" / f"index-{document_id}.lock", timeout=timeout, poll=0.05, busy=busy):
        yield
