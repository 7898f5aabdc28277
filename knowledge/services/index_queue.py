"""Queueing indexing once the writes that need it commit: one document, or many together.

- ``index_queue_on_commit``: one ``knowledge.index_document`` task (a single upload, a retry).
- ``IndexQueue``: the bulk paths (bulk upload, zips, ``import_documents``, ``sync_documents``,
  ``reindex``) collect their documents and queue ``knowledge.index_documents`` tasks of up to
  ``INGEST_INDEX_BATCH_DOCUMENTS`` documents each, so the worker fills embedding batches and
  Milvus upserts across documents instead of paying a part-filled batch per document.

A bulk ingest's queue also collects the domains its files changed: each is refreshed once
(document count, debounced summary request) when the queue is sent, not once per file, so a
thousand files into one domain lock its row and queue its summary task once.

A document (or a domain) is added to a queue only when its own upload commits (a rolled-back
upload queues nothing), and the queue is sent when the caller's transaction commits. A broker that does not
answer leaves the documents PENDING: the pending sweep (or ``reindex``) queues them again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

from config.queueing import registered_task, task_queue_on_commit

logger = logging.getLogger(__name__)

#: (document id, repair): ``repair`` = the document's last run failed or died, so its next run
#: asks Milvus for vectors no chunk row knows of (see knowledge.services.indexing).
IndexEntry = tuple[int, bool]


def index_queue_on_commit(document_id: int, *, repair: bool = False) -> None:
    """Queue indexing of one document once the surrounding transaction commits (the row must
    exist for the worker)."""

    # The document is committed as PENDING; a broker outage must not turn the upload into an
    # error page. `reindex` (or the pending sweep) queues it again.
    task_queue_on_commit(
        "knowledge.index_document",
        args=(document_id,),
        kwargs={"repair": repair},
        on_error=lambda _exc: logger.exception(
            "could not queue indexing of document %s; it stays PENDING", document_id
        ),
    )


def index_batches(entries: Iterable[IndexEntry], *, size: int | None = None) -> list[list[IndexEntry]]:
    """``entries`` in the groups one ``index_documents`` task indexes together, in id order."""
    size = max(1, int(size or settings.INGEST_INDEX_BATCH_DOCUMENTS))
    merged: dict[int, bool] = {}
    for document_id, repair in entries:
        merged[document_id] = merged.get(document_id, False) or bool(repair)
    ordered = sorted(merged.items())
    return [ordered[start : start + size] for start in range(0, len(ordered), size)]


class IndexQueue:
    """Documents a bulk ingest wants indexed, sent as batch tasks by ``send_on_commit``."""

    def __init__(self) -> None:
        self._entries: dict[int, bool] = {}
        self._domains: dict[str, None] = {}  # insertion-ordered set

    def add(self, document_id: int, *, repair: bool = False) -> None:
        """Queue ``document_id`` with the others once the write in progress commits."""

        transaction.on_commit(lambda: self.add_now(document_id, repair=repair))

    def add_now(self, document_id: int, *, repair: bool = False) -> None:
        """Add a document whose row is written in the caller's own transaction (sent with it)."""
        self._entries[document_id] = self._entries.get(document_id, False) or repair

    def domains_changed(self, *domain_ids: str) -> None:
        """Refresh these domains when the queue is sent, once the write in progress commits."""
        changed = [d for d in domain_ids if d]
        if changed:
            transaction.on_commit(lambda: self._domains.update(dict.fromkeys(changed)))

    @property
    def document_ids(self) -> list[int]:
        return sorted(self._entries)

    def domains_refresh(self) -> None:
        """Refresh each changed domain once (``domains_documents_changed``); sending does this."""
        from knowledge.services.domains import domains_documents_changed

        domain_ids, self._domains = list(self._domains), {}
        domains_documents_changed(domain_ids=domain_ids)

    def send_on_commit(self) -> None:
        """Send what was added, once the caller's transaction commits (at once outside one)."""
        transaction.on_commit(self._send)

    def _send(self) -> None:
        index_documents = registered_task("knowledge.index_documents")
        self.domains_refresh()
        entries, self._entries = self._entries, {}
        batches = index_batches(entries.items())
        for sent, batch in enumerate(batches):
            try:
                index_documents.delay([list(entry) for entry in batch])
            except Exception:
                # Do not wait out the broker's timeout for every other batch: the documents are
                # committed PENDING and the pending sweep queues them again.
                left = sum(len(b) for b in batches[sent:])
                logger.exception("could not queue indexing of %d documents; they stay PENDING", left)
                return
