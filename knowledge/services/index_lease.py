"""The lease an indexing run holds on the documents it is indexing, so a run that died is noticed
in about a minute instead of at the task's time limit.

A run marks a document INDEXING with ``index_lease_until`` ``INDEX_LEASE_SECONDS`` ahead
(``knowledge.services.index_status``), and ``index_lease_renewed`` keeps pushing it ahead every
``INDEX_LEASE_RENEW_SECONDS`` from a thread of the run's process while the run works. A process
that dies (SIGKILL, OOM, a lost host) stops renewing: its documents stay INDEXING with a lease in
the past, which the sweep (``knowledge.services.maintenance.documents_pending_requeue``, every
``INGEST_SWEEP_INTERVAL_SECONDS``) takes as "the run died" and queues again at once.

The lease is a column of the document row: it works the same on SQLite (the embedded default)
and MySQL/MariaDB, and needs neither Redis nor the broker. It says who should be working on a
document; the per-document lock (``knowledge.services.locks``) is what keeps two runs apart.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.utils import timezone

from knowledge.models import ApiDocument

logger = logging.getLogger(__name__)


def lease_deadline() -> datetime:
    """Until when a lease taken or renewed now holds."""
    return timezone.now() + timedelta(seconds=float(settings.INDEX_LEASE_SECONDS))


def documents_lease_renew(*, document_ids: list[int]) -> int:
    """Push the lease of those of ``document_ids`` still INDEXING ahead; returns how many.

    A document another writer moved on (INDEXED, FAILED, queued again by the sweep) is not
    touched: only INDEXING carries a lease."""
    return ApiDocument.objects.filter(id__in=document_ids, status=ApiDocument.Status.INDEXING).update(
        index_lease_until=lease_deadline()
    )


@contextlib.contextmanager
def index_lease_renewed(*, document_ids: list[int]) -> Iterator[None]:
    """Renew the lease of ``document_ids`` every ``INDEX_LEASE_RENEW_SECONDS`` while the block runs.

    A thread, because the run's slow steps (a conversion, embedding, an upsert) are single calls
    that cannot stop to renew. A renewal that fails (the database busy or away) is logged and
    tried again at the next interval: the lease is several intervals long."""
    interval = float(settings.INDEX_LEASE_RENEW_SECONDS)
    stop = threading.Event()

    def renew() -> None:
        try:
            while not stop.wait(interval):
                try:
                    documents_lease_renew(document_ids=document_ids)
                except Exception:
                    logger.warning("could not renew the indexing lease of %s", document_ids, exc_info=True)
        finally:
            connections.close_all()  # this thread's own connections only

    renewer = threading.Thread(target=renew, name="index-lease", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join(timeout=interval + 5)
