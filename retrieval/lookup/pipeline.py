"""The lookup pipeline (seed 000, FS-1..FS-6): from a clean query to the agent's body and the
``retrieval_details`` staff read.

Steps: action memory snapshot -> L0 keyword index -> L1 (hybrid or dense Milvus search,
``retrieval.lookup.vector_search``) -> the INDEXED documents among the candidates (the database is the
truth; Milvus may briefly hold vectors of a deleted document) -> candidates with their L1 level
(similarity and lexical evidence, ``retrieval.lookup.ranking``) -> withhold what the session has, domain
dedup -> level and hint -> mark what is returned. Recording is the caller's
(``retrieval.recording``).

When vector search or the action memory is down the pipeline still answers from what works, with
status DEGRADED: without Milvus from the keyword index (L0) alone; without Redis on this
process's own action memory (``retrieval.agents.tracker.fallback_tracker``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models.functions import Length

from knowledge.embeddings import EmbeddingError
from knowledge.selectors import documents_searchable
from knowledge.vectorstore import VectorHit, VectorStoreError
from observability import records as dk
from observability.models import ToolInvocation
from observability.records import lookup_details
from retrieval.agents.scopes import domain_allowed, domains_scoped, memory_scoped
from retrieval.agents.tracker import TrackerUnavailable, fallback_tracker, get_tracker, tracker_backend
from retrieval.lookup.corpus import corpus_signature
from retrieval.lookup.keyword_index import keyword_index_get, text_normalise
from retrieval.lookup.lexical import main_script, query_terms
from retrieval.lookup.normalisation import completeness_hint, similarity_from_l2
from retrieval.lookup.presenter import agent_body
from retrieval.lookup.ranking import DOMAIN_DEDUP_MODES, Candidate, candidates_collect, selection_decide
from retrieval.lookup.results import DocumentRow, message_build, result_items_build
from retrieval.lookup.thresholds import current_thresholds
from retrieval.lookup.vector_search import l1_search

logger = logging.getLogger(__name__)

# L0 documents looked at in detail: a two-character query can match thousands of titles; they
# all count in l0_match_count, the best-ranked this many become candidates.
L0_CANDIDATES = 50


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


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _candidate_detail(
    hit: VectorHit, documents: dict[str, DocumentRow], by_doc: dict[str, Candidate], max_l2: float
) -> dict[str, Any]:
    document = documents.get(hit.doc_key)
    candidate = by_doc.get(hit.doc_key)
    return {
        "doc_key": hit.doc_key,
        "domain": document.domain if document else hit.domain,
        "title": document.title if document else None,
        "chunk_id": hit.chunk_id,
        "chunk_index": hit.chunk_index,
        "score": hit.score,
        "similarity": round(similarity_from_l2(hit.score, max_l2=max_l2), 6),
        "indexed": document is not None,
        "coverage": _round(candidate.coverage) if candidate else None,
        "l1_level": candidate.l1_level.value if candidate and candidate.l1_level else None,
    }


def lookup_run(
    *,
    query: str,
    session_id: str,
    top_k: int,
    dry_run: bool,
    started: float,
    domains: frozenset[str] | None = None,
    language: str = "zh",
) -> LookupRun:
    """``session_id`` is the action-memory key (already scoped by agent); ``domains`` the
    agent's allowed domains (None: every domain); ``language`` the agent-facing one."""
    thresholds = current_thresholds()
    mode = domain_dedup_mode()
    timings: dict[str, float] = {}
    degraded: list[str] = []
    tracker = get_tracker()
    action_memory = tracker_backend()

    t = time.perf_counter()
    try:
        memory = tracker.snapshot(session_id)
    except TrackerUnavailable as exc:
        # Policy: fall back to this process's own memory for the outage (see fallback_tracker).
        logger.warning("action memory unavailable, using this process's memory: %s", exc)
        degraded.append(f"action memory unavailable (using this process's memory): {exc}")
        tracker, action_memory = fallback_tracker(), "memory-fallback"
        memory = tracker.snapshot(session_id)
    memory = memory_scoped(memory, domains)
    timings["tracker_ms"] = _ms(time.perf_counter() - t)

    t = time.perf_counter()
    signature = corpus_signature()
    l0_all = keyword_index_get(signature=signature).match(query)
    timings["l0_ms"] = _ms(time.perf_counter() - t)

    hits = []
    l1_mode_used = None
    embedding_model = None
    vector_cached = l1_cached = False
    vector_search_down = False
    timings["embed_ms"] = timings["search_ms"] = 0.0
    try:
        l1 = l1_search(query=query, top_k=top_k, signature=signature, domain=domains)
    except (EmbeddingError, VectorStoreError) as exc:
        logger.warning("lookup without vector search: %s", exc)
        degraded.append(f"vector search unavailable: {exc}")
        vector_search_down = True
    else:
        hits = list(l1.hits)
        l1_mode_used = l1.mode
        embedding_model = l1.embedding_model
        vector_cached, l1_cached = l1.vector_cached, l1.hits_cached
        timings["embed_ms"], timings["search_ms"] = round(l1.embed_ms, 2), round(l1.search_ms, 2)

    # Only searchable documents count: the database is the truth.
    t = time.perf_counter()
    l0_considered = l0_all[:L0_CANDIDATES]
    wanted = {m.doc_key for m in l0_considered} | {h.doc_key for h in hits}
    # Searchable = has an indexed version (a document being re-indexed still answers); SQLite
    # finds these by the doc_key index (the status index made it walk every indexed document).
    rows = (
        documents_searchable()
        .filter(doc_key__in=wanted)
        .annotate(content_len=Length("content"))
        .order_by()
        .values("id", "doc_key", "title", "domain", "content_len", "status")
    )
    documents = {
        row["doc_key"]: DocumentRow(
            id=row["id"],
            doc_key=row["doc_key"],
            title=row["title"],
            domain=row["domain"],
            content_len=row["content_len"],
        )
        for row in rows
        if domain_allowed(row["domain"], domains)
    }
    timings["documents_ms"] = _ms(time.perf_counter() - t)
    l0 = [m for m in l0_considered if m.doc_key in documents]
    l0_match_count = len(l0) + max(0, len(l0_all) - L0_CANDIDATES)
    live_hits = [h for h in hits if h.doc_key in documents]
    t = time.perf_counter()
    terms = query_terms(query) if any(h.text for h in live_hits) else ()
    candidates = candidates_collect(
        l0=l0,
        hits=live_hits,
        thresholds=thresholds,
        l0_match_count=l0_match_count,
        terms=terms,
        query_script=main_script(text_normalise(query)),
    )
    timings["lexical_ms"] = _ms(time.perf_counter() - t)
    by_doc = {c.doc_key: c for c in candidates}
    for candidate in candidates:
        document = documents[candidate.doc_key]
        candidate.domain, candidate.title = document.domain, document.title

    selection = selection_decide(
        candidates=candidates,
        memory=memory,
        thresholds=thresholds,
        domain_dedup=mode,
        max_supplement=settings.RETRIEVAL_MAX_SUPPLEMENT,
    )
    t_content = time.perf_counter()
    items = result_items_build(
        returned=selection.returned,
        documents=documents,
        content_max_chars=settings.RETRIEVAL_CONTENT_MAX_CHARS,
    )
    timings["content_ms"] = _ms(time.perf_counter() - t_content)
    # Everything between search and marking: both queries above, ranking and selection.
    timings["db_ms"] = _ms(time.perf_counter() - t)

    domains_before = memory.domain_list
    marks = [(c.domain, c.doc_key) for c in selection.returned]
    domains_after = list(dict.fromkeys(domains_before + [d for d, _ in marks]))
    if marks and not dry_run:
        t = time.perf_counter()
        try:
            domains_after = tracker.mark_many(session_id, marks)
        except TrackerUnavailable as exc:
            logger.warning("lookup could not mark the session, marked in this process: %s", exc)
            degraded.append(f"action memory unavailable (marked in this process's memory): {exc}")
            action_memory = "memory-fallback"
            domains_after = fallback_tracker().mark_many(session_id, marks)
        domains_after = domains_scoped(domains_after, domains)
        timings["tracker_ms"] = round(timings["tracker_ms"] + _ms(time.perf_counter() - t), 2)

    level = selection.level
    hint = completeness_hint(level, language)
    message = message_build(
        selection=selection,
        domains_before=domains_before,
        held_in_blocked_domain=memory.domains.get(selection.blocked_domain or "", []),
        domain_dedup=mode,
        degraded=bool(degraded),
        vector_search_down=vector_search_down,
        language=language,
    )
    body = agent_body(
        found=selection.found,
        items=items,
        level=level,
        hint=hint,
        domains_after=domains_after,
        message=message,
    )

    # Raw scores of the live documents' best chunks, closest first (the seeds' l1_scores).
    l1_doc_scores = sorted(c.score for c in candidates if c.score is not None)
    top_score = l1_doc_scores[0] if l1_doc_scores else None
    max_l2 = thresholds.max_l2_distance
    timings["total_ms"] = _ms(time.perf_counter() - started)
    details = lookup_details(
        **{
            dk.QUERY: query,
            dk.TOP_K: top_k,
            dk.DOMAIN_DEDUP: mode,
            dk.THRESHOLDS: thresholds.as_dict(),
            dk.L0_MATCH_COUNT: l0_match_count,
            dk.L0_TITLES: [m.title for m in l0],
            dk.L0_DOC_KEYS: [m.doc_key for m in l0],
            dk.L0_TERMS: sorted({t for m in l0 for t in m.terms}),
            dk.L1_SCORES: l1_doc_scores,
            dk.L1_TOP_SCORE: top_score,
            dk.L1_TOP_SIMILARITY: (
                None if top_score is None else round(similarity_from_l2(top_score, max_l2=max_l2), 4)
            ),
            dk.L1_CANDIDATES: [_candidate_detail(h, documents, by_doc, max_l2) for h in hits],
            dk.L1_MODE: l1_mode_used,
            dk.QUERY_TERMS: [[t.text, round(t.weight, 3)] for t in terms],
            dk.RELEVANCE_LEVEL: level.value if level else None,
            dk.COMPLETENESS_HINT: hint,
            dk.AGENT_LANGUAGE: language,
            dk.RETRIEVED_DOMAINS: domains_after,
            dk.RETRIEVED_DOMAINS_BEFORE: domains_before,
            dk.DEDUP_REASON: selection.dedup_reason,
            dk.BLOCKED_DOMAIN: selection.blocked_domain,
            dk.RETURNED_DOC_KEYS: [c.doc_key for c in selection.returned],
            dk.RETURNED_DOMAINS: [c.domain for c in selection.returned],
            dk.WITHHELD_DOC_KEYS: [c.doc_key for c in selection.withheld],
            dk.EMBEDDING_MODEL: embedding_model,
            dk.QUERY_VECTOR_CACHED: vector_cached,
            dk.L1_CACHED: l1_cached,
            dk.DEGRADED: degraded,
            dk.ACTION_MEMORY: action_memory,
            dk.VECTOR_SEARCH: "unavailable" if vector_search_down else "ok",
            dk.TIMINGS: timings,
        }
    )
    status = ToolInvocation.Status.DEGRADED if degraded else ToolInvocation.Status.SUCCESS
    return LookupRun(body, details, status)
