"""Dify's External Knowledge API (``POST /api/dify/retrieval``): agentkb as a Dify knowledge base.

``dify_retrieve(*, body, agent)`` validates Dify's request body, searches the chunks of one domain
(``knowledge_id`` = a domain id) or of all domains (``*``) with the lookup's own L1
(``retrieval.lookup.vector_search.l1_search``: hybrid dense + BM25 by default), keeps chunks whose
normalised similarity (the lookup's ``1 - min(d, max_l2) / max_l2``, 0..1) reaches
``retrieval_setting.score_threshold`` and whose document passes ``metadata_condition``, and answers
at most ``top_k`` of them, best first, as Dify ``records``. Every call is recorded as a tool
invocation named ``dify_retrieval``.

Dify keeps its own conversation state, so there is no action memory here: the same query gets the
same records every time. Exact keyword matching (the lookup's L0) is not used either: Dify ranks
by score, and a keyword match has none.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from knowledge.embeddings import EmbeddingError
from knowledge.models import ApiDocument, DocumentChunk, KnowledgeDomain
from knowledge.selectors import documents_searchable
from knowledge.vectorstore import VectorStoreError
from observability.models import ToolInvocation
from retrieval.agents.texts import echoed
from retrieval.lookup.corpus import corpus_signature
from retrieval.lookup.inputs import ONLY_INVISIBLE, invisible_only, unicode_problem
from retrieval.lookup.metadata_conditions import (
    ConditionError,
    MetadataCondition,
    keywords_of,
    metadata_condition_clean,
)
from retrieval.lookup.normalisation import similarity_from_l2
from retrieval.lookup.thresholds import current_thresholds
from retrieval.lookup.vector_search import l1_search
from retrieval.recording import dify_call_record

ALL_DOMAINS = "*"
MAX_TOP_K = 100
# Chunks fetched from Milvus per requested record: metadata filters and the threshold drop some.
FETCH_FACTOR = 4


class DifyInputError(ValidationError):
    """A request body Dify's contract does not allow; the message names the field."""


class UnknownKnowledge(Exception):
    """``knowledge_id`` names no domain (Dify error 2001)."""


class SearchUnavailable(Exception):
    """The embedding model or Milvus did not answer."""


@dataclass(frozen=True)
class DifyRequest:
    knowledge_id: str
    query: str
    top_k: int
    score_threshold: float
    metadata_condition: MetadataCondition


def _fail(field: str, message: str) -> DifyInputError:
    return DifyInputError({field: [message]})


def dify_request_clean(body: Any) -> DifyRequest:
    """Validate Dify's body; raise DifyInputError naming the first field at fault."""
    if not isinstance(body, dict):
        raise _fail("body", "must be a JSON object")
    knowledge_id = body.get("knowledge_id")
    if not isinstance(knowledge_id, str) or not knowledge_id.strip():
        raise _fail("knowledge_id", "a domain id or '*' is required")
    if problem := unicode_problem(knowledge_id):
        raise _fail("knowledge_id", problem)
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise _fail("query", "a non-blank string is required")
    if problem := unicode_problem(query):
        raise _fail("query", problem)  # as REST refuses it: it can be neither embedded nor stored
    query = query.strip()
    if invisible_only(query):
        raise _fail("query", ONLY_INVISIBLE)  # as REST refuses it: it asks nothing
    if len(query) > settings.RETRIEVAL_MAX_QUERY_CHARS:
        raise _fail("query", f"at most {settings.RETRIEVAL_MAX_QUERY_CHARS} characters (it has {len(query)})")

    setting = body.get("retrieval_setting")
    if not isinstance(setting, dict):
        raise _fail("retrieval_setting", "an object with top_k and score_threshold is required")
    top_k = setting.get("top_k")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise _fail("retrieval_setting.top_k", f"an integer between 1 and {MAX_TOP_K} is required")
    threshold = setting.get("score_threshold", 0.0)
    if threshold is None:
        threshold = 0.0  # Dify sends 0.0 when its threshold switch is off; tolerate null too
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
        raise _fail("retrieval_setting.score_threshold", "a number between 0 and 1 is required")

    try:
        condition = metadata_condition_clean(body.get("metadata_condition"))
    except ConditionError as exc:
        raise DifyInputError(exc.message_dict) from None
    return DifyRequest(knowledge_id.strip(), query, top_k, float(threshold), condition)


def _knowledge_exists(knowledge_id: str, domains: frozenset[str] | None) -> bool:
    if knowledge_id == ALL_DOMAINS:
        return True
    if domains is not None and knowledge_id not in domains:
        return False  # a domain outside the agent's scope answers as an unknown one
    return (
        KnowledgeDomain.objects.filter(domain_id=knowledge_id).exists()
        or ApiDocument.objects.filter(domain=knowledge_id).exists()
    )


def _search(request: DifyRequest, domains: frozenset[str] | None = None) -> tuple[list[dict], dict]:
    max_l2 = current_thresholds().max_l2_distance
    fetch = min(max(request.top_k * FETCH_FACTOR, settings.RETRIEVAL_TOP_K), MAX_TOP_K * FETCH_FACTOR)
    domain = None if request.knowledge_id == ALL_DOMAINS else request.knowledge_id
    try:
        # The lookup's own L1 (hybrid or dense, its caches included), limited to the domain.
        l1 = l1_search(query=request.query, top_k=fetch, signature=corpus_signature(), domain=domain)
    except (EmbeddingError, VectorStoreError) as exc:
        raise SearchUnavailable(f"vector search unavailable: {exc}") from exc
    hits, model_name, embed_ms, search_ms = list(l1.hits), l1.embedding_model, l1.embed_ms, l1.search_ms

    started = time.perf_counter()
    documents = {
        row["doc_key"]: row
        for row in documents_searchable()
        .filter(doc_key__in={h.doc_key for h in hits})
        .values("id", "doc_key", "title", "domain", "metadata", "created_at", "updated_at")
        if domains is None or row["domain"] in domains  # the agent's scope (retrieval.agents.scopes)
    }
    chosen = []
    for hit in hits:  # closest first
        document = documents.get(hit.doc_key)
        if document is None:
            continue
        similarity = similarity_from_l2(hit.l2_distance, max_l2=max_l2)
        if similarity < request.score_threshold:
            continue  # hybrid hits come in fused order, not by similarity
        if not request.metadata_condition.passes(document):
            continue
        chosen.append((hit, document, similarity, keywords_of(document["metadata"])))
        if len(chosen) == request.top_k:
            break
    chunks = {
        (c.document_id, c.chunk_index): c
        for c in DocumentChunk.objects.filter(
            document_id__in={d["id"] for _, d, _, _ in chosen},
            chunk_index__in={h.chunk_index for h, _, _, _ in chosen},
        ).only("document_id", "chunk_index", "heading_path", "content")
    }
    # Dify ranks by score: best similarity first (a stable sort keeps L1's order among equals).
    chosen.sort(key=lambda c: -c[2])
    records = []
    for hit, document, similarity, keywords in chosen:
        chunk = chunks.get((document["id"], hit.chunk_index))
        if chunk is None:  # re-indexed between search and read: the next call sees the new chunks
            continue
        records.append(
            {
                "content": chunk.content,
                "score": round(similarity, 4),
                "title": document["title"],
                "metadata": {
                    "path": document["doc_key"],
                    "doc_key": document["doc_key"],
                    "domain": document["domain"],
                    "heading_path": chunk.heading_path,
                    "chunk_index": hit.chunk_index,
                    "keywords": keywords,
                },
            }
        )
    closest = min((h.l2_distance for h in hits), default=None)
    top = similarity_from_l2(closest, max_l2=max_l2) if closest is not None else None
    details = {
        "knowledge_id": request.knowledge_id,
        "query": request.query,
        "top_k": request.top_k,
        "score_threshold": request.score_threshold,
        "metadata_condition": request.metadata_condition.as_dict(),
        "embedding_model": model_name,
        "l1_mode": l1.mode,
        "lexical_engine": l1.lexical_engine,
        "l1_top_score": closest,
        "l1_top_similarity": None if top is None else round(top, 4),
        "l1_candidates": [
            {
                "doc_key": h.doc_key,
                "domain": h.domain,
                "chunk_index": h.chunk_index,
                "score": h.l2_distance,
                "similarity": round(similarity_from_l2(h.l2_distance, max_l2=max_l2), 6),
                "indexed": h.doc_key in documents,
            }
            for h in hits
        ],
        "returned_doc_keys": [r["metadata"]["doc_key"] for r in records],
        "returned_domains": list(dict.fromkeys(r["metadata"]["domain"] for r in records)),
        "timings": {
            "embed_ms": round(embed_ms, 2),
            "search_ms": round(search_ms, 2),
            "db_ms": round((time.perf_counter() - started) * 1000, 2),
        },
    }
    return records, details


def dify_retrieve(
    *, body: Any, agent: str, agent_id: int | None = None, domains: frozenset[str] | None = None
) -> list[dict]:
    """Dify's records for ``body`` (see the module docstring). Raises DifyInputError,
    UnknownKnowledge or SearchUnavailable after recording the failed call."""
    started = time.perf_counter()
    request_record = {"source": "dify", "agent": agent}
    if isinstance(body, dict):
        request_record.update(
            {
                k: _recordable(body.get(k))
                for k in ("knowledge_id", "query", "retrieval_setting", "metadata_condition")
            }
        )
        if isinstance(request_record.get("query"), str):
            request_record["query"] = request_record["query"][:4000]

    def record(status: str, summary: str, *, error: str = "", details: dict | None = None) -> None:
        dify_call_record(
            request=request_record,
            status=status,
            duration_ms=round((time.perf_counter() - started) * 1000),
            summary=summary,
            error=error,
            details=details,
            agent_id=agent_id,
        )

    try:
        request = dify_request_clean(body)
    except DifyInputError as exc:
        record(ToolInvocation.Status.ERROR, "invalid input", error=dify_error_message(exc))
        raise
    if not _knowledge_exists(request.knowledge_id, domains):
        named = echoed(request.knowledge_id)
        record(ToolInvocation.Status.ERROR, "unknown knowledge_id", error=f"no domain {named}")
        raise UnknownKnowledge(f"The knowledge does not exist: no domain {named}")
    try:
        records, details = _search(request, domains)
    except SearchUnavailable as exc:
        record(ToolInvocation.Status.ERROR, "error", error=str(exc))
        raise
    details["timings"]["total_ms"] = round((time.perf_counter() - started) * 1000, 2)
    summary = f"{len(records)} records" + (f": {records[0]['metadata']['doc_key']}" if records else "")
    record(ToolInvocation.Status.SUCCESS, summary, details=details)
    return records


def _recordable(value: Any) -> Any:
    """A request value as it can be stored: lone surrogates escaped (MariaDB's JSON check refuses
    them, as UTF-8 cannot hold them), at any depth."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_recordable(v) for v in value]
    if isinstance(value, dict):
        return {_recordable(k): _recordable(v) for k, v in value.items()}
    return value


def dify_error_message(exc: ValidationError) -> str:
    field, messages = next(iter(exc.message_dict.items()))
    return f"{field}: {' '.join(messages)}"
