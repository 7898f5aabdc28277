"""What an indexing run records on the document: its status and, when it fails, the reason
(credentials masked: the admin shows it).

Every write names the version (``content_hash``) the run works on, so a run overtaken by a
re-upload never marks the newer version: ``document_status_set`` then returns False and the run
leaves the result to the re-upload's own run.
"""

from __future__ import annotations

import logging
from functools import reduce
from operator import or_

from django.db.models import Q
from django.utils import timezone

from config.credentials import mask_credentials
from knowledge.models import ApiDocument
from knowledge.services.index_lease import lease_deadline

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000
#: documents one status query names (one OR of id-and-version pairs: SQLite caps expression depth)
_MARK_BATCH = 100


class TemporaryIndexError(Exception):
    """Indexing could not finish for a reason that may pass (Milvus unreachable, lock busy).

    ``document_ids``: the documents still to index (a batch run names those it did not finish)."""

    def __init__(self, message: str, *, document_ids: list[int] | None = None) -> None:
        super().__init__(message)
        self.document_ids = list(document_ids or [])


def document_status_set(document_id: int, version: str, status: str, error: str = "") -> bool:
    """Set the status of this version of the document (PENDING, FAILED...); False when a newer
    upload replaced it. It ends the run's lease on the document: ``documents_indexing_started``
    marks INDEXING and takes the lease (``knowledge.services.index_lease``)."""
    updated = ApiDocument.objects.filter(id=document_id, content_hash=version).update(
        status=status,
        error=mask_credentials(error)[:MAX_ERROR_CHARS],
        index_lease_until=None,
        updated_at=timezone.now(),
    )
    return bool(updated)


def documents_indexing_started(versions: dict[int, str]) -> set[int]:
    """Mark a run's documents ({id: version}) INDEXING, taking the run's lease and clearing the
    last error, in two queries a hundred documents; returns the ids marked (the others were
    re-uploaded meanwhile)."""
    started: set[int] = set()
    items = sorted(versions.items())
    for start in range(0, len(items), _MARK_BATCH):
        match = reduce(or_, (Q(id=i, content_hash=v) for i, v in items[start : start + _MARK_BATCH]))
        ApiDocument.objects.filter(match).update(
            status=ApiDocument.Status.INDEXING,
            error="",
            index_lease_until=lease_deadline(),
            updated_at=timezone.now(),
        )
        # Read back, because an UPDATE says how many rows it changed, not which.
        marked = ApiDocument.objects.filter(match, status=ApiDocument.Status.INDEXING)
        started.update(marked.values_list("id", flat=True))
    return started


def document_index_failed(*, document_id: int, reason: str) -> None:
    """Record that indexing gave up (the task ran out of retries or time)."""
    documents_index_failed(document_ids=[document_id], reason=reason)


def documents_index_failed(*, document_ids: list[int], reason: str) -> None:
    """document_index_failed for several documents; those already INDEXED are left alone."""
    ApiDocument.objects.filter(id__in=document_ids).exclude(status=ApiDocument.Status.INDEXED).update(
        status=ApiDocument.Status.FAILED,
        error=mask_credentials(reason)[:MAX_ERROR_CHARS],
        index_lease_until=None,
        updated_at=timezone.now(),
    )


def unexpected_reason(exc: BaseException) -> str:
    return f"unexpected error: {exc!r}"
