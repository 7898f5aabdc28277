"""Exclusive locks shared by every process on this machine, waited for at most a deadline: the
embedded default's stand-in for a database lock.

- ``file_lock``: one lock, one file (the lexical index's one writer, an LLM slot).
- ``key_lock`` / ``key_locks_tried``: a lock per integer key (a document's indexing run) on
  one byte of one shared file, so a million documents make one file, not a million, and a batch
  takes its documents' locks with one open and a system call each.

Every lock here dies with its holder (closing the file releases it, and a process's files close
when it dies), so a killed worker never leaves one taken.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

# Linux's open file description locks: held per open file (like flock), on a byte range (like
# POSIX record locks), so two threads of one process, each with its own open, exclude each other.
# ``struct flock`` on 64-bit Linux: l_type, l_whence (short), l_start, l_len (off_t), l_pid (int),
# padded to 32 bytes; l_pid must be 0 for these locks.
_RANGE_LOCKS = hasattr(fcntl, "F_OFD_SETLK")
_FLOCK = "hhxxxxqqixxxx"
_BUSY = (errno.EAGAIN, errno.EACCES)


@contextlib.contextmanager
def file_lock(path: Path, *, timeout: float, poll: float, busy: Callable[[], Exception]) -> Iterator[None]:
    """Hold ``path``'s lock (made if missing) for the block; raise ``busy()`` when another process
    still holds it after ``timeout`` seconds (0: one try). The lock dies with its process, so a
    killed holder never leaves it taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise busy() from None
                time.sleep(poll)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _key_taken(fd: int, key: int) -> bool:
    """Take the lock of ``key`` (the byte at that offset) on ``fd`` without waiting."""
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, key, 1, 0))
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        raise
    return True


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield fd
    finally:
        os.close(fd)  # releases every lock this open holds


@contextlib.contextmanager
def key_lock(
    path: Path, key: int, *, timeout: float, poll: float, busy: Callable[[], Exception]
) -> Iterator[None]:
    """Hold the lock of ``key`` (>= 0) in the file ``path`` for the block; raise ``busy()`` when
    another holder keeps it past ``timeout`` seconds (0: one try)."""
    if not _RANGE_LOCKS:  # not Linux: a file of its own per key
        with file_lock(path.with_name(f"{path.stem}-{key}.lock"), timeout=timeout, poll=poll, busy=busy):
            yield
        return
    with _opened(path) as fd:
        deadline = time.monotonic() + timeout
        while not _key_taken(fd, key):
            if time.monotonic() > deadline:
                raise busy()
            time.sleep(poll)
        yield


@contextlib.contextmanager
def key_locks_tried(path: Path, keys: Iterable[int]) -> Iterator[set[int]]:
    """Try the lock of each of ``keys`` in the file ``path`` once, without waiting; yields the
    keys taken, held until the block ends."""
    if not _RANGE_LOCKS:
        with contextlib.ExitStack() as held:
            taken: set[int] = set()
            for key in keys:
                try:
                    held.enter_context(key_lock(path, key, timeout=0, poll=0, busy=_NotTaken))
                except _NotTaken:
                    continue
                taken.add(key)
            yield taken
        return
    with _opened(path) as fd:
        yield {key for key in keys if _key_taken(fd, key)}


class _NotTaken(Exception):
    pass
