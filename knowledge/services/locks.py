"""Locks shared by every worker: a named lock, and its two uses.

- ``document_lock``: two indexing runs of one document never interleave. Two runs can meet: a
  re-upload queues a new task while the previous one still runs, and a redelivered task can
  overlap a slow one. Interleaved, one run's stale-vector cleanup could delete the other's fresh
  vectors.
- ``llm_slot``: at most ``LLM_TASK_SLOTS`` summary tasks call the LLM at once, so a hung endpoint
  holds that many worker processes and no more (the others index).

MySQL/MariaDB: ``GET_LOCK`` (shared by every worker on every host). Otherwise (the embedded
default, one machine): an ``flock`` on a file under ``AGENTKB_VAR_DIR``. Both die with their
holder (its connection or process), so a killed worker never leaves one taken.

``GET_LOCK`` names belong to the whole database server, not to a database: two deployments (or
a deployment and a test run) on one server would hold each other's document ``index-7`` and
each other's LLM slots. So each name carries the database's name (``server_lock_name``).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

from django.db import connection

from config.env import VAR_DIR
from config.file_locks import file_lock


class LockTimeout(Exception):
    """Another run held the document's lock for longer than we were willing to wait."""


#: MySQL and MariaDB refuse a ``GET_LOCK`` name longer than this
SERVER_LOCK_NAME_MAX = 64


def server_lock_name(name: str, *, database: str) -> str:
    """The server-wide ``GET_LOCK`` name of the lock ``name`` of ``database``. A name too long
    for the server (a long database name) keeps its readable end and a digest of the whole."""
    full = f"agentkb:{database}:{name}"
    if len(full) <= SERVER_LOCK_NAME_MAX:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:24]
    return f"agentkb:{digest}:{name}"[:SERVER_LOCK_NAME_MAX]


@contextlib.contextmanager
def named_lock(name: str, *, timeout: float, busy: str) -> Iterator[None]:
    """Hold the lock ``name`` for the block; raise ``LockTimeout(busy)`` when another holder keeps
    it past ``timeout`` seconds (0: one try)."""
    if connection.vendor == "mysql":
        server_name = server_lock_name(name, database=connection.settings_dict["NAME"])
        with connection.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, %s)", [server_name, int(timeout)])
            (got,) = cursor.fetchone()
        if got != 1:
            raise LockTimeout(busy)
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT RELEASE_LOCK(%s)", [server_name])
        return

    def refused() -> LockTimeout:
        return LockTimeout(busy)

    with file_lock(VAR_DIR / "locks" / f"{name}.lock", timeout=timeout, poll=0.05, busy=refused):
        yield


@contextlib.contextmanager
def document_lock(*, document_id: int, timeout: float = 600.0) -> Iterator[None]:
    with named_lock(
        f"index-{document_id}",
        timeout=timeout,
        busy=f"document {document_id} is being indexed by another run",
    ):
        yield


@contextlib.contextmanager
def llm_slot(*, slots: int) -> Iterator[bool]:
    """Take one of ``slots`` LLM slots for the block without waiting: yields True when one was
    free (or ``slots`` is 0: no cap), False when every slot is taken."""
    if slots <= 0:
        yield True
        return
    for slot in range(slots):
        held = contextlib.ExitStack()
        try:
            held.enter_context(named_lock(f"llm-slot-{slot}", timeout=0, busy="taken"))
        except LockTimeout:
            continue
        with held:  # a LockTimeout raised by the block itself is not mistaken for a taken slot
            yield True
        return
    yield False
