"""Make the knowledge base mirror a folder (a git checkout of docs, a Confluence or Notion export).

``folder_sync`` reads every supported file below the folder (named and given domains as by
``import_documents``: the path below the folder is the doc key, a subfolder is the domain unless
the frontmatter or ``domain`` names one) and then, per file:

- new: ingested (added); changed (another content hash): ingested (re-indexed);
- the same hash as the stored document: skipped, with no write at all (not even the retry of a
  failed document an admin re-upload would do: re-running a sync changes nothing);
- bad (parse or sniff refused it): reported, nothing stored.

Documents a previous sync of this folder wrote (``metadata["sync_source"]``) whose file is gone
are deleted only with ``prune``; documents uploaded otherwise are never touched by a prune.
``dry_run`` reports the same outcomes and writes nothing. ``SYNC_SOURCES`` (folder = domain)
lets beat run this on a schedule (``knowledge.sync_sources``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from knowledge.models import ApiDocument
from knowledge.parsing import DocumentParseError, parse_document
from knowledge.services.documents import (
    ADDED,
    FAILED,
    UNCHANGED,
    UPDATED,
    document_delete,
    document_ingest_safely,
)
from knowledge.services.index_queue import IndexQueue
from knowledge.services.uploads import UploadItem, folder_items

DELETED = "deleted"


@dataclass
class SyncReport:
    source: str
    dry_run: bool
    outcomes: dict[str, list[str]] = field(
        default_factory=lambda: {ADDED: [], UPDATED: [], UNCHANGED: [], FAILED: [], DELETED: []}
    )
    errors: dict[str, str] = field(default_factory=dict)
    queued_ids: list[int] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return len(self.outcomes[outcome])

    @property
    def changed(self) -> bool:
        return any(self.outcomes[o] for o in (ADDED, UPDATED, DELETED))

    def summary(self) -> str:
        verb = "would be " if self.dry_run else ""
        return (
            f"{self.source}: {self.count(ADDED)} {verb}added, {self.count(UPDATED)} {verb}updated, "
            f"{self.count(UNCHANGED)} unchanged, {self.count(FAILED)} failed, "
            f"{self.count(DELETED)} {verb}deleted"
        )


def sync_source_name(directory: Path) -> str:
    return str(Path(directory).resolve())


def _planned(item: UploadItem, *, domain: str | None) -> tuple[str, str, ApiDocument | None]:
    """(outcome, error, existing document) of one file, without writing anything."""
    if item.skip_reason:
        return FAILED, item.skip_reason, None
    try:
        parsed = parse_document(item.data, name=item.name, domain=domain or item.folder_domain)
    except DocumentParseError as exc:
        return FAILED, str(exc), None
    existing = (
        ApiDocument.objects.filter(doc_key=parsed.doc_key).only("id", "content_hash", "metadata").first()
    )
    if existing is None:
        return ADDED, "", None
    if existing.content_hash == parsed.content_hash:
        return UNCHANGED, "", existing
    return UPDATED, "", existing


def folder_sync(
    *,
    directory: Path,
    domain: str | None = None,
    prune: bool = False,
    dry_run: bool = False,
    progress: Callable[[str, str], None] | None = None,
) -> SyncReport:
    """Mirror ``directory`` (see the module docstring). ``progress(name, outcome)`` per file."""
    directory = Path(directory)
    source = sync_source_name(directory)
    report = SyncReport(source=source, dry_run=dry_run)
    items = folder_items([directory])
    seen: set[str] = set()
    queue = IndexQueue()  # the changed files are indexed together, once all are stored
    for item in items:
        seen.add(item.name)
        outcome, error, existing = _planned(item, domain=domain)
        if outcome in (ADDED, UPDATED) and not dry_run:
            result = document_ingest_safely(
                data=item.data, name=item.name, domain=domain or item.folder_domain, index_queue=queue
            )
            outcome, error = result.outcome, result.error
            if result.document is not None:
                _mark_source(result.document.pk, source)
                if outcome in (ADDED, UPDATED):
                    report.queued_ids.append(result.document.pk)
        elif outcome == UNCHANGED and not dry_run and (existing.metadata or {}).get("sync_source") != source:
            _mark_source(existing.pk, source)  # adopted: a later prune may remove it
        report.outcomes[outcome].append(item.name)
        if error:
            report.errors[item.name] = error
        if progress is not None:
            progress(item.name, outcome)
    queue.send_on_commit()

    if prune:
        gone = (
            ApiDocument.objects.filter(metadata__sync_source=source)
            .exclude(doc_key__in=seen)
            .order_by("doc_key")
        )
        for document in gone:
            if not dry_run:
                document_delete(document=document)
            report.outcomes[DELETED].append(document.doc_key)
            if progress is not None:
                progress(document.doc_key, DELETED)
    return report


@transaction.atomic
def _mark_source(document_id: int, source: str) -> None:
    document = ApiDocument.objects.select_for_update().only("id", "metadata").get(pk=document_id)
    metadata = dict(document.metadata or {})
    if metadata.get("sync_source") != source:
        metadata["sync_source"] = source
        ApiDocument.objects.filter(pk=document_id).update(metadata=metadata)


def sync_sources_run(*, sources: dict[str, str], prune: bool) -> list[SyncReport]:
    """Each configured folder (``SYNC_SOURCES``: folder -> domain, empty = from the folders)."""
    reports = []
    for folder, domain in sources.items():
        reports.append(folder_sync(directory=Path(folder), domain=domain or None, prune=prune))
    return reports
