"""Stage "marking": the session now holds what was returned (seed 004 Part A), so the next lookup
withholds it. A dry run (hit testing) marks nothing and shows the domains the call would leave.

A mark the shared store refuses is made in this process's own memory and said (``degraded``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from retrieval.agents.scopes import domains_scoped
from retrieval.agents.tracker import TrackerUnavailable, fallback_tracker
from retrieval.agents.tracker.base import chunk_mark
from retrieval.lookup.memory import MemoryRead
from retrieval.lookup.ranking import Selection
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.results import ResultItems

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Marked:
    #: the session's domains before and after this call, first-retrieved order
    domains_before: list[str]
    domains_after: list[str]
    #: the action memory that holds the session now (see ``MemoryRead.backend``)
    backend: str
    degraded: tuple[str, ...] = ()


def sent_marks(selection: Selection, content: ResultItems) -> list[tuple[str, str]]:
    """What the session now holds: each returned document whole, or the chunks its item carried
    (a supplement's chunk, a long primary's window), so a later question on another part of it
    gets that part (``SessionRetrievals.holds``)."""
    marks: list[tuple[str, str]] = []
    for candidate, parts in zip(selection.returned, content.carried, strict=True):
        if parts is None:
            marks.append((candidate.domain, candidate.doc_key))
        else:
            marks += [(candidate.domain, chunk_mark(candidate.doc_key, index)) for index in sorted(parts)]
    return marks


def session_mark(
    request: LookupRequest, memory: MemoryRead, selection: Selection, content: ResultItems
) -> Marked:
    session_id, domains = request.session_id, request.domains
    before = memory.memory.domain_list
    marks = sent_marks(selection, content)
    after = list(dict.fromkeys(before + [domain for domain, _ in marks]))
    if not marks or request.dry_run:
        return Marked(before, after, memory.backend)
    try:
        after = memory.tracker.mark_many(session_id, marks)
    except TrackerUnavailable as exc:
        logger.warning("lookup could not mark the session, marked in this process: %s", exc)
        after = fallback_tracker().mark_many(session_id, marks)
        return Marked(
            before,
            domains_scoped(after, domains),
            "memory-fallback",
            (f"action memory unavailable (marked in this process's memory): {exc}",),
        )
    return Marked(before, domains_scoped(after, domains), memory.backend)
