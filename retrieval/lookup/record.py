"""The call record of a lookup: the stages' outputs as the ``retrieval_details`` staff read
(``observability.records``: the contract, its keys and their meaning). Raw scores go here and
never to the agent (FS-4)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from observability import records as keys
from retrieval.lookup.answer import Answer
from retrieval.lookup.candidates import ChunkCandidates
from retrieval.lookup.clock import StageClock
from retrieval.lookup.evidence import CandidateEvidence
from retrieval.lookup.filtering import DocumentFilter
from retrieval.lookup.marking import Marked
from retrieval.lookup.normalisation import similarity_from_l2
from retrieval.lookup.ranking import Candidate, Selection
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.results import DocumentRow
from retrieval.lookup.search import ChunkHit
from retrieval.lookup.searchable import Searchable


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _candidate_detail(
    hit: ChunkHit, documents: dict[str, DocumentRow], by_doc: dict[str, Candidate], max_l2: float
) -> dict[str, Any]:
    document = documents.get(hit.doc_key)
    candidate = by_doc.get(hit.doc_key)
    return {
        "doc_key": hit.doc_key,
        "domain": document.domain if document else hit.domain,
        "title": document.title if document else None,
        "chunk_id": hit.chunk_id,
        "chunk_index": hit.chunk_index,
        "score": hit.l2_distance,
        "similarity": round(similarity_from_l2(hit.l2_distance, max_l2=max_l2), 6),
        "indexed": document is not None,
        "coverage": _round(candidate.coverage) if candidate else None,
        "l1_level": candidate.l1_level.value if candidate and candidate.l1_level else None,
        "estimate": _round(candidate.estimate) if candidate else None,
    }


def levels_detail(request: LookupRequest, candidates: list[Candidate]) -> dict[str, Any]:
    """How the level was decided, with each candidate's estimate and the evidence behind it."""
    model = request.level_model
    return {
        "rule": f"model:{model.name}" if model else "thresholds",
        "candidates": [
            {
                "doc_key": c.doc_key,
                "estimate": _round(c.estimate),
                "features": {k: round(v, 4) for k, v in (c.features or {}).items()},
                "precise": c.precise,
                "via_l0": c.via_l0,
                "l1_level": c.l1_level.value if c.l1_level else None,
            }
            for c in candidates
        ],
    }


def stage_timings(clock: StageClock, chunks: ChunkCandidates, started: float) -> dict[str, float]:
    """The seeds' timings: the memory read plus the mark as ``tracker_ms``; the call's metadata
    condition as ``filter_ms``; L1's own split of embedding and search; ``db_ms`` everything
    between search and marking."""
    return {
        "tracker_ms": clock.get("memory", "marking"),
        "filter_ms": clock.get("filtering"),
        "l0_ms": clock.get("candidates:l0"),
        "embed_ms": chunks.embed_ms,
        "search_ms": chunks.search_ms,
        "documents_ms": clock.get("searchable"),
        "lexical_ms": clock.get("evidence"),
        "content_ms": clock.get("content"),
        "db_ms": clock.get("evidence", "selection", "content"),
        "total_ms": round((time.perf_counter() - started) * 1000, 2),
    }


@dataclass(frozen=True)
class LookupTrace:
    """Every stage's output a call record is made of."""

    request: LookupRequest
    filtered: DocumentFilter
    chunks: ChunkCandidates
    searchable: Searchable
    evidence: CandidateEvidence
    selection: Selection
    marked: Marked
    answer: Answer


def condition_detail(request: LookupRequest, filtered: DocumentFilter) -> dict[str, Any] | None:
    """The call's metadata condition as it was applied (the conditions in force, ignored ones left
    out) and how many searchable documents of the call's domains passed it; None without one."""
    if request.metadata_condition is None:
        return None
    return {
        **request.metadata_condition.as_dict(),
        "matching_documents": None if filtered.doc_keys is None else len(filtered.doc_keys),
    }


def lookup_record(trace: LookupTrace, timings: dict[str, float]) -> keys.LookupRecord:
    request, chunks, searchable, evidence = trace.request, trace.chunks, trace.searchable, trace.evidence
    selection, marked, answer, thresholds = trace.selection, trace.marked, trace.answer, request.thresholds
    l0, max_l2 = searchable.l0, thresholds.max_l2_distance
    # Raw scores of the live documents' best chunks, closest first (the seeds' l1_scores).
    scores = sorted(c.l2_distance for c in evidence.candidates if c.l2_distance is not None)
    top = scores[0] if scores else None
    by_doc = evidence.by_doc()
    return keys.lookup_details(
        **{
            keys.QUERY: request.query,
            keys.TOP_K: request.top_k,
            keys.DOMAIN_DEDUP: request.domain_dedup,
            keys.THRESHOLDS: thresholds.as_dict(),
            keys.L0_MATCH_COUNT: searchable.l0_match_count,
            keys.L0_TITLES: [m.title for m in l0],
            keys.L0_DOC_KEYS: [m.doc_key for m in l0],
            keys.L0_TERMS: sorted({t for m in l0 for t in m.terms}),
            keys.L1_SCORES: scores,
            keys.L1_TOP_SCORE: top,
            keys.L1_TOP_SIMILARITY: None if top is None else round(similarity_from_l2(top, max_l2=max_l2), 4),
            keys.L1_CANDIDATES: [
                _candidate_detail(h, searchable.documents, by_doc, max_l2) for h in chunks.hits
            ],
            keys.L1_MODE: chunks.mode,
            keys.LEXICAL_ENGINE: chunks.lexical_engine,
            keys.QUERY_TERMS: [[t.text, round(t.weight, 3)] for t in evidence.terms],
            keys.RELEVANCE_LEVEL: answer.level.value if answer.level else None,
            keys.COMPLETENESS_HINT: answer.hint,
            keys.AGENT_LANGUAGE: request.language,
            keys.RETRIEVED_DOMAINS: marked.domains_after,
            keys.RETRIEVED_DOMAINS_BEFORE: marked.domains_before,
            keys.DEDUP_REASON: selection.dedup_reason,
            keys.BLOCKED_DOMAIN: selection.blocked_domain,
            keys.RETURNED_DOC_KEYS: [c.doc_key for c in selection.returned],
            keys.RETURNED_DOMAINS: [c.domain for c in selection.returned],
            keys.WITHHELD_DOC_KEYS: [c.doc_key for c in selection.withheld],
            keys.EMBEDDING_MODEL: chunks.embedding_model,
            keys.QUERY_VECTOR_CACHED: chunks.vector_cached,
            keys.L1_CACHED: chunks.hits_cached,
            keys.DEGRADED: answer.degraded,
            keys.ACTION_MEMORY: marked.backend,
            keys.VECTOR_SEARCH: "unavailable" if chunks.down else "ok",
            keys.TIMINGS: timings,
            keys.LEVELS: levels_detail(request, evidence.candidates),
            keys.METADATA_CONDITION: condition_detail(request, trace.filtered),
        }
    )
