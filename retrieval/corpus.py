"""A cheap signature of the searchable corpus, shared by every process through the database.

Uploads, re-indexing and deletes happen in other processes (the Celery worker, another web
worker), and the knowledge app must not call into retrieval. So each process notices changes by
itself: the signature of the INDEXED documents (how many, the sum of their ids, the latest
updated_at and indexed_at) is read at most every ``RETRIEVAL_INDEX_REFRESH_MS`` and the L0 index
and the cached L1 results are rebuilt or dropped when it moves.

Why these four: a delete lowers the count and the id sum; an upload or a re-index finishing raises
the latest indexed_at; a document leaving INDEXED (re-index started) lowers the count; a metadata
edit through ``save()`` raises the latest updated_at (``auto_now``). A delete and an upload in the
same interval still change the id sum.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db.models import Count, Max, Sum

from knowledge.models import ApiDocument

_lock = threading.Lock()
_state: dict = {"signature": None, "checked_at": 0.0}


def _read_signature() -> tuple:
    agg = ApiDocument.objects.filter(status=ApiDocument.Status.INDEXED).aggregate(
        n=Count("id"), ids=Sum("id"), updated=Max("updated_at"), indexed=Max("indexed_at")
    )
    return (
        agg["n"] or 0,
        int(agg["ids"] or 0),
        agg["updated"].isoformat() if agg["updated"] else "",
        agg["indexed"].isoformat() if agg["indexed"] else "",
    )


def corpus_signature() -> tuple:
    """The corpus signature, read from the database at most every RETRIEVAL_INDEX_REFRESH_MS."""
    interval = settings.RETRIEVAL_INDEX_REFRESH_MS / 1000.0
    now = time.monotonic()
    state = _state
    if state["signature"] is not None and now - state["checked_at"] < interval:
        return state["signature"]
    signature = _read_signature()
    with _lock:
        _state.update(signature=signature, checked_at=now)
    return signature


def corpus_signature_forget() -> None:
    """Make the next call read the database (tests, or after a known change in this process)."""
    with _lock:
        _state.update(signature=None, checked_at=0.0)
