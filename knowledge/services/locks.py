"""Locks shared by every worker: a named lock, and what it guards.

- ``document_lock`` / ``documents_locked``: two indexing runs of one document never interleave.
  Two runs can meet: a re-upload queues a new task while the previous one still runs, and a
  redelivered task can overlap a slow one. Interleaved, one run's stale-vector cleanup could
  delete the other's fresh vectors. A run of one document waits for its lock; a batch takes the
  locks of all its documents at once, without waiting.
- ``llm_slot``: at most ``LLM_TASK_SLOTS`` summary tasks call the LLM at once, so a hung endpoint
  holds that many worker processes and no more (the others index).

MySQL/MariaDB: ``GET_LOCK`` (shared by every worker on every host). Otherwise (the embedded
default, one machine): locks on files under ``AGENTKB_VAR_DIR/locks`` (every document's in one
file, a byte each: ``config.file_locks``). Both die with their holder (its connection or
process), so a killed worker never leaves one taken.

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
from config.file_locks import file_lock, key_lock, key_locks_tried


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


def _server_name(name: str) -> str:
    return server_lock_name(name, database=connection.settings_dict["NAME"])


@contextlib.contextmanager
def _server_lock(name: str, *, timeout: float, busy: str) -> Iterator[None]:
    server_name = _server_name(name)
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


@contextlib.contextmanager
def named_lock(name: str, *, timeout: float, busy: str) -> Iterator[None]:
    """Hold the lock ``name`` for the block; raise ``LockTimeout(busy)`` when another holder keeps
    it past ``timeout`` seconds (0: one try)."""
    if connection.vendor == "mysql":
        with _server_lock(name, timeout=timeout, busy=busy):
            yield
        return

    def refused() -> LockTimeout:
        return LockTimeout(busy)

    with file_lock(VAR_DIR / "locks" / f"{name}.lock", timeout=timeout, poll=0.05, busy=refused):
        yield


def document_busy(document_id: int) -> LockTimeout:
    return LockTimeout(f"document {document_id} is being indexed by another run")


#: The embedded default's document locks: a byte each of this one file (config.file_locks)
DOCUMENT_LOCKS_FILE = "documents.lock"


@contextlib.contextmanager
def document_lock(*, document_id: int, timeout: float = 600.0) -> Iterator[None]:
    """Hold one document's indexing lock, waiting for it at most ``timeout`` seconds."""
    busy = document_busy(document_id)
    if connection.vendor == "mysql":
        with _server_lock(f"index-{document_id}", timeout=timeout, busy=str(busy)):
            yield
        return

    def refused() -> LockTimeout:
        return busy

    with key_lock(
        VAR_DIR / "locks" / DOCUMENT_LOCKS_FILE, document_id, timeout=timeout, poll=0.05, busy=refused
    ):
        yield


@contextlib.contextmanager
def documents_locked(*, document_ids: list[int]) -> Iterator[set[int]]:
    """Try the indexing lock of each of ``document_ids`` once, without waiting (a batch run hands
    a held document to a run of its own instead); yields the ids whose lock was taken, held until
    the block ends. One query on MySQL/MariaDB, one open file on the embedded default."""
    if not document_ids:
        yield set()
        return
    if connection.vendor != "mysql":
        with key_locks_tried(VAR_DIR / "locks" / DOCUMENT_LOCKS_FILE, document_ids) as taken:
            yield taken
        return
    names = [_server_name(f"index-{i}") for i in document_ids]
    with connection.cursor() as cursor:  # a connection may hold many named locks at once
        cursor.execute("SELECT " + ", ".join(["GET_LOCK(%s, 0)"] * len(names)), names)
        got = cursor.fetchone()
    taken = {i for i, one in zip(document_ids, got, strict=True) if one == 1}
    try:
        yield taken
    finally:
        if taken:
            release = [n for i, n in zip(document_ids, names, strict=True) if i in taken]
            with connection.cursor() as cursor:
                cursor.execute("SELECT " + ", ".join(["RELEASE_LOCK(%s)"] * len(release)), release)


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
