"""Stages "selection" and "content": withhold what the session holds, apply domain dedup, pick the
primary and the supplement and name the level of what is returned (FS-2, FS-3;
``retrieval.lookup.ranking.selection_decide``); then the text each returned document carries
(``retrieval.lookup.results.result_items_build``)."""

from __future__ import annotations

from retrieval.lookup.evidence import CandidateEvidence
from retrieval.lookup.memory import MemoryRead
from retrieval.lookup.ranking import Selection, selection_decide
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.results import ResultItems, result_items_build
from retrieval.lookup.searchable import Searchable


def selection_make(request: LookupRequest, evidence: CandidateEvidence, memory: MemoryRead) -> Selection:
    return selection_decide(
        candidates=evidence.candidates,
        memory=memory.memory,
        thresholds=request.thresholds,
        domain_dedup=request.domain_dedup,
        max_supplement=request.max_supplement,
        by_estimate=request.level_model is not None,
    )


def content_build(
    request: LookupRequest, selection: Selection, searchable: Searchable, memory: MemoryRead
) -> ResultItems:
    """One agent-facing item per returned document, primary first, and what each carries."""
    return result_items_build(
        returned=selection.returned,
        documents=searchable.documents,
        content_max_chars=request.content_max_chars,
        held=memory.memory.chunks_sent,
    )
