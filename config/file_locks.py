"""An exclusive lock on a file, shared by every process on this machine, waited for at most a
deadline: the embedded default's stand-in for a database lock (one document's indexing run, the
lexical index's one writer)."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable, Iterator
from pathlib import Path


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
