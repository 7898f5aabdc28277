"""A signature of the searchable corpus, shared by every process through the database.

Uploads, re-indexing and deletes happen in other processes (the Celery worker, another web
worker), and the knowledge app must not call into retrieval. So each process notices changes by
itself: the signature of the INDEXED documents (how many, the sum of their ids, the latest
updated_at and indexed_at) is re-read in the background, and the L0 index and the cached L1
results are rebuilt or dropped when it moves.

Why these four: a delete lowers the count and the id sum; an upload or a re-index finishing raises
the latest indexed_at; a document leaving INDEXED (re-index started) lowers the count; a metadata
edit through ``save()`` raises the latest updated_at (``auto_now``). A delete and an upload in the
same interval still change the id sum.

Reading the latest updated_at / indexed_at visits every indexed document's row (they are in no
index): 30-100 ms at 10,000 documents on SQLite, and done every second it slowed lookups by tens of
ms (bench/lookup.py). The count and id sum come from the status index alone (a few ms). So a daemon
thread per process reads the cheap part every ``RETRIEVAL_INDEX_REFRESH_MS`` (uploads, deletes and
a re-index in progress show within it) and the full signature every ``FULL_READ_EVERY`` intervals
(edits in place, e.g. new keywords, and a re-index shorter than one interval show within ten
intervals); lookups take the latest value. A lookup
reads the full signature itself the first time, and when the watcher fell behind (three intervals
without a reading). ``RETRIEVAL_INDEX_REFRESH_MS=0`` reads it on every call, in the caller's thread
(tests).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Sum

from knowledge.selectors import documents_searchable

logger = logging.getLogger(__name__)


FULL_READ_EVERY = 10


def _read_counts() -> tuple[int, int]:
    """(count, id sum) of the INDEXED documents: answered from the status index alone."""
    agg = documents_searchable().order_by().aggregate(n=Count("id"), ids=Sum("id"))
    return agg["n"] or 0, int(agg["ids"] or 0)


def _read_signature() -> tuple:
    agg = (
        documents_searchable()
        .order_by()
        .aggregate(n=Count("id"), ids=Sum("id"), updated=Max("updated_at"), indexed=Max("indexed_at"))
    )
    return (
        agg["n"] or 0,
        int(agg["ids"] or 0),
        agg["updated"].isoformat() if agg["updated"] else "",
        agg["indexed"].isoformat() if agg["indexed"] else "",
    )


class _Watcher:
    """The process's latest signature and the thread that keeps it fresh."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.signature: tuple | None = None
        self.read_at = 0.0
        self.thread: threading.Thread | None = None
        self.pid = os.getpid()

    def store(self, signature: tuple) -> None:
        with self.lock:
            self.signature, self.read_at = signature, time.monotonic()

    def ensure_thread(self) -> None:
        with self.lock:
            if self.pid != os.getpid():
                # A forked child (gunicorn, Celery prefork) inherits no running thread.
                self.pid, self.thread = os.getpid(), None
            if self.thread is not None and self.thread.is_alive():
                return
            self.thread = threading.Thread(target=self._run, name="agentkb-corpus-watcher", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        tick = 0
        while True:
            interval = settings.RETRIEVAL_INDEX_REFRESH_MS / 1000.0
            if interval <= 0:
                return
            time.sleep(interval)
            tick += 1
            try:
                if tick % FULL_READ_EVERY == 0 or self.signature is None:
                    self.store(_read_signature())
                else:
                    counts = _read_counts()
                    latest = self.signature
                    self.store(counts + latest[2:] if latest is not None else _read_signature())
            except Exception:  # a database hiccup must not kill the watcher; lookups fall back
                logger.warning("corpus signature refresh failed", exc_info=True)
            finally:
                # This thread's connection would otherwise stay open (and pin SQLite's WAL).
                connection.close()


_watcher = _Watcher()


def corpus_signature() -> tuple:
    """The corpus signature as of at most ``RETRIEVAL_INDEX_REFRESH_MS`` ago."""
    interval = settings.RETRIEVAL_INDEX_REFRESH_MS / 1000.0
    if interval <= 0:
        return _read_signature()
    watcher = _watcher
    signature = watcher.signature
    if signature is None or time.monotonic() - watcher.read_at > 3 * interval or watcher.pid != os.getpid():
        signature = _read_signature()
        watcher.store(signature)
        watcher.ensure_thread()
    return signature


def corpus_signature_forget() -> None:
    """Make the next call read the database (tests, or after a known change in this process)."""
    with _watcher.lock:
        _watcher.signature, _watcher.read_at = None, 0.0
