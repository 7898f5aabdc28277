"""The lookup_knowledge tool (seed 000, FS-1..FS-6) and the session action-memory services.

``lookup_knowledge(*, query, session_id, top_k=None, dry_run=False, agent="", source="api")``
    Run one lookup and return a ``LookupOutcome``:
    - ``body``: exactly what the agent gets (camelCase: found, primary, supplement,
      relevanceLevel, completenessHint, retrievedDomainsThisSession, message). No scores.
    - ``details``: the ``retrieval_details`` JSON (raw L1 scores, similarities, L0 matches, the
      L1 candidates with doc_key / domain / chunk / raw score / similarity / title, what was
      returned and withheld, thresholds in force, timings). Staff pages show it; agents never.
    - ``invocation_id``: the ToolInvocation written for the call (None on a dry run).
    ``dry_run=True`` (hit testing) neither marks the session nor records an invocation; the body
    shows ``retrievedDomainsThisSession`` as the call would have left it.
    Bad input raises ``LookupInputError`` (a ValidationError naming the field) after recording the
    failed call. When vector search or the action memory is down the lookup still answers from
    what works, with status DEGRADED: without Milvus from the keyword index (L0) alone, with a
    message saying semantic search is unavailable; without Redis on this process's own action
    memory (``retrieval.tracker.fallback_tracker``, recorded as ``action_memory: memory-fallback``
    in the details). Any other failure is recorded as ERROR and re-raised.

``session_retrievals_clear(*, session_id)``: forget what a session has retrieved.

Steps of a lookup: L0 keyword index -> L1 Milvus search -> the INDEXED documents among the
candidates (the database is the truth; Milvus may briefly hold vectors of a deleted document) ->
rank -> withhold what the session has, domain dedup -> level and hint -> mark what is returned ->
record one ToolInvocation (one INSERT).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db.models.functions import Length

from knowledge.embeddings import EmbeddingError
from knowledge.selectors import documents_searchable
from knowledge.vectorstore import VectorStoreError
from observability.models import ToolInvocation
from observability.services import invocation_record
from retrieval.corpus import corpus_signature
from retrieval.keyword_index import keyword_index_get
from retrieval.normalisation import completeness_hint, similarity_from_l2
from retrieval.ranking import DOMAIN_DEDUP_MODES, candidates_collect, selection_decide
from retrieval.results import DocumentRow, message_build, result_items_build
from retrieval.thresholds import current_thresholds
from retrieval.tracker import TrackerUnavailable, fallback_tracker, get_tracker, tracker_backend
from retrieval.vector_search import l1_search

logger = logging.getLogger(__name__)

TOOL_NAME = "lookup_knowledge"
MAX_TOP_K = 100
MAX_SESSION_ID_CHARS = 128
# L0 documents looked at in detail: a two-character query can match thousands of titles; they
# all count in l0_match_count, the best-ranked this many become candidates.
L0_CANDIDATES = 50
_RECORDED_TEXT = 4000


class LookupInputError(ValidationError):
    """Bad input, naming the field. ``invocation_id`` is the recorded failed call, if any."""

    invocation_id: int | None = None


@dataclass(frozen=True)
class LookupOutcome:
    body: dict[str, Any]
    details: dict[str, Any]
    invocation_id: int | None
    status: str


def domain_dedup_mode() -> str:
    mode = (settings.RETRIEVAL_DOMAIN_DEDUP or "").strip().lower()
    if mode not in DOMAIN_DEDUP_MODES:
        raise ImproperlyConfigured(
            f"RETRIEVAL_DOMAIN_DEDUP must be one of {', '.join(DOMAIN_DEDUP_MODES)}; got '{mode}'"
        )
    return mode


def session_id_clean(session_id: Any) -> str:
    """A session id: a non-blank string of at most 128 characters (the column's size)."""
    if session_id is None:
        raise ValidationError({"session_id": ["This field is required."]})
    if not isinstance(session_id, str):
        raise ValidationError({"session_id": ["Must be a string."]})
    cleaned = session_id.strip()
    if problem := _unicode_problem(cleaned):
        raise ValidationError({"session_id": [problem]})
    if not cleaned:
        raise ValidationError({"session_id": ["This field may not be blank."]})
    if len(cleaned) > MAX_SESSION_ID_CHARS:
        raise ValidationError(
            {"session_id": [f"Ensure this field has no more than {MAX_SESSION_ID_CHARS} characters."]}
        )
    return cleaned


def lookup_input_clean(*, query: Any, session_id: Any, top_k: Any) -> tuple[str, str, int]:
    """Validate a lookup's input; raise ValidationError naming every field at fault."""
    errors: dict[str, list[str]] = {}
    cleaned_query = ""
    max_chars = settings.RETRIEVAL_MAX_QUERY_CHARS
    if query is None:
        errors["query"] = ["This field is required."]
    elif not isinstance(query, str):
        errors["query"] = ["Must be a string."]
    else:
        cleaned_query = query.strip()
        if problem := _unicode_problem(cleaned_query):
            errors["query"] = [problem]
        elif not cleaned_query:
            errors["query"] = ["This field may not be blank."]
        elif len(cleaned_query) > max_chars:
            errors["query"] = [
                f"Ensure this field has no more than {max_chars} characters (it has {len(cleaned_query)})."
            ]
    cleaned_session = ""
    try:
        cleaned_session = session_id_clean(session_id)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    cleaned_top_k = settings.RETRIEVAL_TOP_K
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            errors["top_k"] = ["A valid integer is required."]
        elif not 1 <= top_k <= MAX_TOP_K:
            errors["top_k"] = [f"Ensure this value is between 1 and {MAX_TOP_K}."]
        else:
            cleaned_top_k = top_k
    if errors:
        raise ValidationError(errors)
    return cleaned_query, cleaned_session, cleaned_top_k


def _clip(value: Any) -> Any:
    """A request value as recorded: strings capped, other JSON scalars kept, anything else shown."""
    if isinstance(value, str):
        # Lone surrogates cannot be stored as UTF-8: recorded escaped, as the agent sent them.
        return value[:_RECORDED_TEXT].encode("utf-8", "backslashreplace").decode("utf-8")
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return repr(value)[:200]


def _unicode_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored or embedded, if it cannot (JSON lets lone surrogates through)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"Contains a character that is not valid Unicode text (a lone surrogate at {exc.start})."
    return None


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def lookup_knowledge(
    *,
    query: Any,
    session_id: Any,
    top_k: Any = None,
    dry_run: bool = False,
    agent: str = "",
    source: str = "api",
) -> LookupOutcome:
    """One lookup_knowledge call (see the module docstring)."""
    started = time.perf_counter()
    request = {"query": _clip(query), "session_id": _clip(session_id), "top_k": _clip(top_k)}
    if agent:
        request["agent"] = agent
    if source:
        request["source"] = source
    recorded_session = _clip(session_id.strip())[:MAX_SESSION_ID_CHARS] if isinstance(session_id, str) else ""

    try:
        clean_query, clean_session, clean_top_k = lookup_input_clean(
            query=query, session_id=session_id, top_k=top_k
        )
    except ValidationError as exc:
        error = LookupInputError(exc.message_dict)
        if not dry_run:
            invocation = invocation_record(
                tool_name=TOOL_NAME,
                session_id=recorded_session,
                request=request,
                status=ToolInvocation.Status.ERROR,
                duration_ms=round(_ms(time.perf_counter() - started)),
                result_summary="invalid input",
                error="; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()),
            )
            error.invocation_id = invocation.pk
        raise error from None

    try:
        body, details, status = _lookup_run(
            query=clean_query, session_id=clean_session, top_k=clean_top_k, dry_run=dry_run, started=started
        )
    except Exception as exc:
        if not dry_run:
            try:
                invocation_record(
                    tool_name=TOOL_NAME,
                    session_id=clean_session,
                    request=request,
                    status=ToolInvocation.Status.ERROR,
                    duration_ms=round(_ms(time.perf_counter() - started)),
                    result_summary="error",
                    error=f"{type(exc).__name__}: {exc}",
                    retrieval_details={"query": clean_query, "error": f"{type(exc).__name__}: {exc}"[:1000]},
                )
            except Exception:  # the database itself may be what failed; the original error matters
                logger.exception("could not record the failed lookup")
        raise

    if dry_run:
        return LookupOutcome(body, details, None, status)
    invocation = invocation_record(
        tool_name=TOOL_NAME,
        session_id=clean_session,
        request=request,
        status=status,
        duration_ms=round(details["timings"]["total_ms"]),
        result_summary=_summary(body, details),
        error="; ".join(details["degraded"]),
        relevance_level=details["relevance_level"],
        dedup_reason=details["dedup_reason"],
        retrieval_details=details,
    )
    return LookupOutcome(body, details, invocation.pk, status)


def _summary(body: dict, details: dict) -> str:
    level = details["relevance_level"]
    if body["found"]:
        extra = f" +{len(body['supplement'])} supplement" if body["supplement"] else ""
        return f"{level}: {body['primary']['docKey']}{extra}"
    if level:
        return f"{level} ({details['dedup_reason']}): withheld {', '.join(details['withheld_doc_keys'][:5])}"
    return "not found"


def _lookup_run(
    *, query: str, session_id: str, top_k: int, dry_run: bool, started: float
) -> tuple[dict, dict, str]:
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
    timings["tracker_ms"] = _ms(time.perf_counter() - t)

    t = time.perf_counter()
    signature = corpus_signature()
    l0_all = keyword_index_get(signature=signature).match(query)
    timings["l0_ms"] = _ms(time.perf_counter() - t)

    hits = []
    embedding_model = None
    vector_cached = l1_cached = False
    vector_search_down = False
    timings["embed_ms"] = timings["search_ms"] = 0.0
    try:
        l1 = l1_search(query=query, top_k=top_k, signature=signature)
    except (EmbeddingError, VectorStoreError) as exc:
        logger.warning("lookup without vector search: %s", exc)
        degraded.append(f"vector search unavailable: {exc}")
        vector_search_down = True
    else:
        hits = list(l1.hits)
        embedding_model = l1.embedding_model
        vector_cached, l1_cached = l1.vector_cached, l1.hits_cached
        timings["embed_ms"], timings["search_ms"] = round(l1.embed_ms, 2), round(l1.search_ms, 2)

    # Only documents INDEXED now count: the database is the truth.
    t = time.perf_counter()
    l0_considered = l0_all[:L0_CANDIDATES]
    keys = {m.doc_key for m in l0_considered} | {h.doc_key for h in hits}
    # Searchable = has an indexed version (a document being re-indexed still answers); SQLite
    # finds these by the doc_key index (the status index made it walk every indexed document).
    rows = (
        documents_searchable()
        .filter(doc_key__in=keys)
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
    }
    timings["documents_ms"] = _ms(time.perf_counter() - t)
    l0 = [m for m in l0_considered if m.doc_key in documents]
    l0_match_count = len(l0) + max(0, len(l0_all) - L0_CANDIDATES)
    live_hits = [h for h in hits if h.doc_key in documents]
    candidates = candidates_collect(
        l0=l0, hits=live_hits, thresholds=thresholds, l0_match_count=l0_match_count
    )
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
        timings["tracker_ms"] = round(timings["tracker_ms"] + _ms(time.perf_counter() - t), 2)

    level = selection.level
    hint = completeness_hint(level)
    message = message_build(
        selection=selection,
        domains_before=domains_before,
        held_in_blocked_domain=memory.domains.get(selection.blocked_domain or "", []),
        domain_dedup=mode,
        degraded=bool(degraded),
        vector_search_down=vector_search_down,
    )
    body = {
        "found": selection.found,
        "primary": items[0] if items else None,
        "supplement": items[1:],
        "relevanceLevel": level.value if level else None,
        "completenessHint": hint,
        "retrievedDomainsThisSession": domains_after,
        "message": message,
    }

    # Raw scores of the live documents' best chunks, closest first (the seeds' l1_scores).
    l1_doc_scores = sorted(c.score for c in candidates if c.score is not None)
    top_score = l1_doc_scores[0] if l1_doc_scores else None
    max_l2 = thresholds.max_l2_distance
    timings["total_ms"] = _ms(time.perf_counter() - started)
    details = {
        "query": query,
        "top_k": top_k,
        "domain_dedup": mode,
        "thresholds": thresholds.as_dict(),
        "l0_match_count": l0_match_count,
        "l0_titles": [m.title for m in l0],
        "l0_doc_keys": [m.doc_key for m in l0],
        "l0_terms": sorted({t for m in l0 for t in m.terms}),
        "l1_scores": l1_doc_scores,
        "l1_top_score": top_score,
        "l1_top_similarity": (
            None if top_score is None else round(similarity_from_l2(top_score, max_l2=max_l2), 4)
        ),
        "l1_candidates": [
            {
                "doc_key": h.doc_key,
                "domain": documents[h.doc_key].domain if h.doc_key in documents else h.domain,
                "title": documents[h.doc_key].title if h.doc_key in documents else None,
                "chunk_id": h.chunk_id,
                "chunk_index": h.chunk_index,
                "score": h.score,
                "similarity": round(similarity_from_l2(h.score, max_l2=max_l2), 6),
                "indexed": h.doc_key in documents,
            }
            for h in hits
        ],
        "relevance_level": level.value if level else None,
        "completeness_hint": hint,
        "retrieved_domains": domains_after,
        "retrieved_domains_before": domains_before,
        "dedup_reason": selection.dedup_reason,
        "blocked_domain": selection.blocked_domain,
        "returned_doc_keys": [c.doc_key for c in selection.returned],
        "returned_domains": [c.domain for c in selection.returned],
        "withheld_doc_keys": [c.doc_key for c in selection.withheld],
        "embedding_model": embedding_model,
        "query_vector_cached": vector_cached,
        "l1_cached": l1_cached,
        "degraded": degraded,
        "action_memory": action_memory,
        "vector_search": "unavailable" if vector_search_down else "ok",
        "timings": timings,
    }
    status = ToolInvocation.Status.DEGRADED if degraded else ToolInvocation.Status.SUCCESS
    return body, details, status


def session_retrievals_clear(*, session_id: str) -> None:
    """Forget everything the session has retrieved (seed clearSession)."""
    get_tracker().clear_session(session_id_clean(session_id))
