"""The lookup pipeline (seed 000, FS-1..FS-6): from a clean query to the agent's body and the
call record staff read, as a list of stages (``docs/architecture.md`` has one line a stage).

Each stage is a function from typed inputs to one frozen dataclass, in a module of its own under
``retrieval.lookup``; ``StageClock`` times each from outside. Recording the call is the caller's
(``retrieval.recording``). When vector search or the action memory is down the lookup still
answers from what works, with status DEGRADED: without Milvus from the keyword index (L0) alone;
without Redis on this process's own action memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from retrieval.lookup.answer import answer_build
from retrieval.lookup.candidates import chunk_candidates, keyword_candidates
from retrieval.lookup.clock import StageClock
from retrieval.lookup.evidence import evidence_weigh
from retrieval.lookup.filtering import documents_filter
from retrieval.lookup.marking import session_mark
from retrieval.lookup.memory import memory_read
from retrieval.lookup.metadata_conditions import MetadataCondition
from retrieval.lookup.ranking import DOMAIN_DEDUP_MODES
from retrieval.lookup.record import LookupTrace, lookup_record, stage_timings
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.searchable import searchable_select
from retrieval.lookup.selection import content_build, selection_make
from retrieval.lookup.thresholds import current_level_model, current_thresholds


@dataclass(frozen=True)
class LookupRun:
    body: dict[str, Any]
    details: dict[str, Any]
    status: str


def domain_dedup_mode() -> str:
    mode = (settings.RETRIEVAL_DOMAIN_DEDUP or "").strip().lower()
    if mode not in DOMAIN_DEDUP_MODES:
        raise ImproperlyConfigured(
            f"RETRIEVAL_DOMAIN_DEDUP must be one of {', '.join(DOMAIN_DEDUP_MODES)}; got '{mode}'"
        )
    return mode


def lookup_run(
    *,
    query: str,
    session_id: str,
    top_k: int,
    dry_run: bool,
    started: float,
    domains: frozenset[str] | None = None,
    language: str = "zh",
    metadata_condition: MetadataCondition | None = None,
) -> LookupRun:
    """``session_id`` is the action-memory key (already scoped by agent); ``domains`` the
    domains this call searches (the agent's scope, narrowed by the call's filter; None: every
    domain); ``language`` the agent-facing one; ``metadata_condition`` the call's own (None: none)."""
    request = lookup_request(query, session_id, top_k, dry_run, domains, language, metadata_condition)
    clock = StageClock()
    with clock.lookup():
        memory = clock.run("memory", memory_read, request)
        filtered = clock.run("filtering", documents_filter, request)
        keyword = clock.run("candidates:l0", keyword_candidates, request)
        chunks = clock.run("candidates:l1", chunk_candidates, request, keyword, filtered)
        searchable = clock.run("searchable", searchable_select, request, keyword, chunks, filtered)
        evidence = clock.run("evidence", evidence_weigh, request, searchable)
        selection = clock.run("selection", selection_make, request, evidence, memory)
        content = clock.run("content", content_build, request, selection, searchable, memory)
        marked = clock.run("marking", session_mark, request, memory, selection, content)
        answer = clock.run("answer", answer_build, request, selection, content.items, memory, marked, chunks)
    trace = LookupTrace(request, filtered, chunks, searchable, evidence, selection, marked, answer)
    details = lookup_record(trace, stage_timings(clock, chunks, started))
    return LookupRun(answer.body, dict(details), answer.status)


def lookup_request(
    query: str,
    session_id: str,
    top_k: int,
    dry_run: bool,
    domains: frozenset[str] | None,
    language: str,
    metadata_condition: MetadataCondition | None = None,
) -> LookupRequest:
    return LookupRequest(
        query=query,
        session_id=session_id,
        top_k=top_k,
        dry_run=dry_run,
        domains=domains,
        language=language,
        thresholds=current_thresholds(),
        domain_dedup=domain_dedup_mode(),
        max_supplement=settings.RETRIEVAL_MAX_SUPPLEMENT,
        content_max_chars=settings.RETRIEVAL_CONTENT_MAX_CHARS,
        level_model=current_level_model(),
        metadata_condition=metadata_condition,
    )
