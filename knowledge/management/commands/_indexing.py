"""Shared by import_documents and reindex: wait for indexing to finish, with a progress bar."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

from knowledge.models import ApiDocument

DONE = (ApiDocument.Status.INDEXED, ApiDocument.Status.FAILED)


def wait_for_indexing(document_ids: list[int], *, timeout: float, poll: float = 0.5) -> dict[str, int]:
    """Block until every document is INDEXED or FAILED (or ``timeout`` passes).

    Returns the count per status at the end. Polls the database: the worker may be another process
    or another machine, and the status column is where it reports.
    """
    ids = list(dict.fromkeys(document_ids))
    deadline = time.monotonic() + timeout
    counts: dict[str, int] = {}
    with tqdm(total=len(ids), desc="indexing", unit="doc", file=sys.stderr, disable=not ids) as bar:
        while True:
            rows = ApiDocument.objects.filter(id__in=ids).values_list("status", flat=True)
            counts = {}
            for status in rows:
                counts[status] = counts.get(status, 0) + 1
            finished = sum(counts.get(s, 0) for s in DONE) + (len(ids) - len(rows))  # deleted = done
            bar.update(finished - bar.n)
            if finished >= len(ids) or time.monotonic() > deadline:
                return counts
            time.sleep(poll)
