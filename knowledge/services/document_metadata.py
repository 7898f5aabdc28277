"""A document's planner metadata: ``covers`` and ``when_to_retrieve`` in ``api_document.metadata``.

Each value records who wrote it in ``<key>_source``: "manual" (frontmatter or staff, never
overwritten), "llm" or "extractive" (generated here). Generated values also record the content
hash they were made from (``summary_content_hash``), so a re-upload with new text gets new ones,
and why the extractive summariser stood in for a configured LLM (``summary_reason``).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.queueing import task_queue_on_commit
from knowledge.llm import LLMError, LLMUnavailable, get_llm_client
from knowledge.models import ApiDocument
from knowledge.services.domains import domain_documents_changed, domains_documents_changed
from knowledge.summaries import DocumentSummary, extractive_document_summary, llm_document_summary

logger = logging.getLogger(__name__)

SUMMARY_FIELDS = ("covers", "when_to_retrieve")
GENERATED = ("llm", "extractive")
MANUAL = "manual"


def document_indexed(*, document_id: int) -> None:
    """Call (on commit) once a document reached INDEXED: ``documents_indexed`` for one."""
    documents_indexed(document_ids=[document_id])


def documents_indexed(*, document_ids: list[int]) -> None:
    """Call (on commit) once documents reached INDEXED, e.g. an indexing batch's.

    Queues the filling of the covers / when_to_retrieve of those whose frontmatter lacks them
    (each filled one then reports its domain changed): one summary task for every LLM slot at
    most (``LLM_TASK_SLOTS``), each filling its share in turn, not one task a document. The
    domains of the others are reported changed at once, each once however many of the batch's
    documents it holds.
    """
    documents = ApiDocument.objects.filter(pk__in=document_ids, status=ApiDocument.Status.INDEXED).only(
        "id", "domain", "status", "metadata", "content_hash"
    )
    changed: list[str] = []  # the domains of those that need no summary (once each, below)
    needing: list[int] = []
    for document in documents.order_by("id"):
        if document_summary_needed(document=document):
            needing.append(document.id)
        else:
            changed.append(document.domain)
    for share in summary_shares(needing, slots=int(settings.LLM_TASK_SLOTS)):
        task_queue_on_commit("knowledge.tasks.domains.documents_summary_fill_task", args=(share,))
    domains_documents_changed(domain_ids=changed)


def summary_shares(document_ids: list[int], *, slots: int) -> list[list[int]]:
    """``document_ids`` dealt into one list per LLM slot (as many tasks as can call the LLM at
    once; a task more would only find every slot taken), or one each when slots are not capped."""
    parts = len(document_ids) if slots <= 0 else min(slots, len(document_ids))
    return [document_ids[k::parts] for k in range(parts)]


def _field_needed(metadata: dict, key: str, content_hash: str) -> bool:
    value = metadata.get(key)
    source = metadata.get(f"{key}_source")
    if source in GENERATED:
        return not value or metadata.get("summary_content_hash") != content_hash
    # Manual (frontmatter, staff) or a value of unknown origin: never overwritten.
    return not value


def document_fields_needed(*, document: ApiDocument) -> list[str]:
    """Which of covers / when_to_retrieve this document still needs generated."""
    metadata = document.metadata if isinstance(document.metadata, dict) else {}
    return [key for key in SUMMARY_FIELDS if _field_needed(metadata, key, document.content_hash)]


def document_summary_needed(*, document: ApiDocument) -> bool:
    return bool(document_fields_needed(document=document))


def _keywords(metadata: dict) -> list[str]:
    keywords = metadata.get("keywords") or []
    return [str(k) for k in keywords] if isinstance(keywords, list) else [str(keywords)]


def document_summary_fill(*, document_id: int, llm_failure: str = "") -> list[str]:
    """Generate the covers / when_to_retrieve a document lacks and store them. Returns the keys written.

    The LLM when one is configured (invalid output: retried, then extractive with the reason),
    else the extractive summariser. ``llm_failure`` (the task gave up on the endpoint) forces the
    extractive summariser and records why. Raises LLMUnavailable for the caller to retry.
    On success the domain is reported changed, so its summary is regenerated (debounced).
    """
    document = ApiDocument.objects.filter(pk=document_id).first()
    if document is None or document.status != ApiDocument.Status.INDEXED:
        return []
    if not document_fields_needed(document=document):
        return []
    metadata = document.metadata if isinstance(document.metadata, dict) else {}
    arguments = {"title": document.title, "content": document.content, "keywords": _keywords(metadata)}

    client = get_llm_client()
    if llm_failure:
        summary = extractive_document_summary(**arguments, reason=f"LLM failed: {llm_failure}")
    elif client is None:
        summary = extractive_document_summary(**arguments)
    else:
        try:
            summary = llm_document_summary(client=client, **arguments)
        except LLMUnavailable:
            raise
        except LLMError as exc:
            # Refused for good (bad key, unknown model): retrying will not help.
            summary = extractive_document_summary(**arguments, reason=f"LLM refused: {exc}")
    written = _summary_store(document_id=document_id, content_hash=document.content_hash, summary=summary)
    if written:
        domain_documents_changed(domain_id=document.domain)
    return written


@transaction.atomic
def _summary_store(*, document_id: int, content_hash: str, summary: DocumentSummary) -> list[str]:
    document = ApiDocument.objects.select_for_update().filter(pk=document_id).first()
    if document is None or document.content_hash != content_hash:
        # Deleted or re-uploaded while we worked: the new version's own run fills it.
        return []
    # Re-check under the row lock: staff may have written a value meanwhile.
    needed = document_fields_needed(document=document)
    metadata = dict(document.metadata) if isinstance(document.metadata, dict) else {}
    values = {"covers": summary.covers, "when_to_retrieve": summary.when_to_retrieve}
    for key in needed:
        metadata[key] = values[key]
        metadata[f"{key}_source"] = summary.source
    if needed:
        metadata["summary_content_hash"] = content_hash
        metadata["summary_generated_at"] = timezone.now().isoformat()
        if summary.reason:
            metadata["summary_reason"] = summary.reason
        else:
            metadata.pop("summary_reason", None)
        document.metadata = metadata
        document.save(update_fields=["metadata", "updated_at"])
    return needed


@transaction.atomic
def document_metadata_update(
    *, document_id: int, covers: list[str] | None = None, when_to_retrieve: str | None = None
) -> ApiDocument:
    """Staff edit of a document's covers / when_to_retrieve. A value given becomes "manual" (never
    overwritten); an empty one hands the field back to the generator. None leaves a field alone."""
    document = ApiDocument.objects.select_for_update().get(pk=document_id)
    metadata = dict(document.metadata) if isinstance(document.metadata, dict) else {}
    if covers is not None:
        if not isinstance(covers, list) or not all(isinstance(c, str) for c in covers):
            raise ValueError("covers: must be a list of strings")
        cleaned = [c.strip() for c in covers if c.strip()]
        _set_manual(metadata, "covers", cleaned)
    if when_to_retrieve is not None:
        if not isinstance(when_to_retrieve, str):
            raise ValueError("when_to_retrieve: must be a string")
        _set_manual(metadata, "when_to_retrieve", when_to_retrieve.strip())
    document.metadata = metadata
    document.save(update_fields=["metadata", "updated_at"])

    if document_summary_needed(document=document):
        document_id_ = document.pk
        transaction.on_commit(lambda: document_indexed(document_id=document_id_))
    else:
        domain_documents_changed(domain_id=document.domain)
    return document


def _set_manual(metadata: dict, key: str, value) -> None:
    if value:
        metadata[key] = value
        metadata[f"{key}_source"] = MANUAL
    else:
        metadata.pop(key, None)
        metadata.pop(f"{key}_source", None)
