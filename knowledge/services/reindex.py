"""Re-index documents that are already stored (``reindex``, the admin's *Retry indexing*)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from knowledge.models import ApiDocument
from knowledge.services.index_queue import IndexQueue


@transaction.atomic
def documents_reindex(*, domain: str | None = None, document_ids: list[int] | None = None) -> int:
    """Queue indexing of every document (or one domain's, or the given ones), in batch tasks
    (``INGEST_INDEX_BATCH_DOCUMENTS`` documents each). Returns how many."""
    documents = ApiDocument.objects.all()
    if domain:
        documents = documents.filter(domain=domain)
    if document_ids is not None:
        documents = documents.filter(id__in=document_ids)
    rows = list(documents.values_list("id", "status", "error"))
    ApiDocument.objects.filter(id__in=[r[0] for r in rows]).update(
        status=ApiDocument.Status.PENDING, error="", updated_at=timezone.now()
    )
    queue = IndexQueue()
    for document_id, status, error in rows:
        # Statuses are reset here, so whether a run must look for leftovers travels with the task.
        queue.add_now(document_id, repair=status != ApiDocument.Status.INDEXED or bool(error))
    queue.send_on_commit()
    return len(rows)
