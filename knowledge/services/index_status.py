"""What an indexing run records on the document: its status and, when it fails, the reason
(credentials masked: the admin shows it).

Every write names the version (``content_hash``) the run works on, so a run overtaken by a
re-upload never marks the newer version: ``document_status_set`` then returns False and the run
leaves the result to the re-upload's own run.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from config.credentials import mask_credentials
from knowledge.models import ApiDocument
from knowledge.services.index_lease import lease_deadline

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000


class TemporaryIndexError(Exception):
    """Indexing could not finish for a reason that may pass (Milvus unreachable, lock busy).

    ``document_ids``: the documents still to index (a batch run names those it did not finish)."""

    def __init__(self, message: str, *, document_ids: list[int] | None = None) -> None:
        super().__init__(message)
        self.document_ids = list(document_ids or [])


def document_status_set(document_id: int, version: str, status: str, error: str = "") -> bool:
    """Set the status of this version of the document; False when a newer upload replaced it.

    INDEXING takes the run's lease on the document (``knowledge.services.index_lease``); any
    other status ends it."""
    lease = lease_deadline() if status == ApiDocument.Status.INDEXING else None
    updated = ApiDocument.objects.filter(id=document_id, content_hash=version).update(
        status=status,
        error=mask_credentials(error)[:MAX_ERROR_CHARS],
        index_lease_until=lease,
        updated_at=timezone.now(),
    )
    return bool(updated)


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
