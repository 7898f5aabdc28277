"""The call record: what a tool call leaves for staff, owned here and filled by retrieval.

Observability defines the contract and retrieval writes to it (retrieval -> observability, never
back). ``ToolInvocation.retrieval_details`` is JSON that the dashboards (generated columns over
``l1_top_similarity`` and ``returned_domains[0]``), hit testing, the invocation detail page and the
calibration tools read. Its keys are the seeds' and stay as they are (the seed SQL reads them);
they live here once, as constants, and ``LookupRecord`` types the whole dict. The names that rows
hold in columns of their own (tool, relevance level, dedup reason) are the enums below.

A candidate in ``L1_CANDIDATES`` is one L1 chunk hit: ``doc_key``, ``domain``, ``title``,
``chunk_id``, ``chunk_index``, ``score`` (raw squared L2), ``similarity`` (FS-1), ``indexed``,
``coverage`` (lexical evidence, or None), ``l1_level`` (what L1 alone says of its document).

``RECORD_VERSION`` counts incompatible changes of the contract: a reader of old rows compares it
with what it expects. Adding a key is compatible; renaming or dropping one is not.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict

RECORD_VERSION = 1


class ToolName(StrEnum):
    """``ToolInvocation.tool_name``: which tool an agent called."""

    LOOKUP = "lookup_knowledge"
    DIFY = "dify_retrieval"


class RelevanceLevel(StrEnum):
    """``ToolInvocation.relevance_level`` (V010) and the agent's ``relevanceLevel``."""

    PRECISE = "PRECISE"
    HIGHLY_RELEVANT = "HIGHLY_RELEVANT"
    REFERENCE = "REFERENCE"
    # seed 000 Phase 2: candidates existed but this session already has them (or hard domain
    # dedup blocked the call).
    DEDUPED = "DEDUPED"


class DedupReason(StrEnum):
    """``ToolInvocation.dedup_reason`` (V010): why something was withheld; NULL when nothing was."""

    #: a candidate document was already returned to this session
    DOC_RETRIEVED = "doc_retrieved"
    #: hard domain dedup: the session already holds the primary candidate's domain
    DOMAIN_RETRIEVED = "domain_retrieved"


QUERY = "query"
TOP_K = "top_k"
DOMAIN_DEDUP = "domain_dedup"
#: the thresholds in force: max_l2_distance, highly_relevant, reference, source, profile
THRESHOLDS = "thresholds"
THRESHOLDS_SOURCE = "source"
L0_MATCH_COUNT = "l0_match_count"
L0_TITLES = "l0_titles"
L0_DOC_KEYS = "l0_doc_keys"
L0_TERMS = "l0_terms"
#: raw scores of the live documents' best chunks, closest first (the seeds' l1_scores)
L1_SCORES = "l1_scores"
L1_TOP_SCORE = "l1_top_score"
#: FS-1 similarity of the closest chunk (the dashboards' histogram reads it)
L1_TOP_SIMILARITY = "l1_top_similarity"
L1_CANDIDATES = "l1_candidates"
#: "hybrid:rrf", "hybrid:weighted" or "dense" (None when vector search was down)
L1_MODE = "l1_mode"
#: the lexical engine hybrid L1 read: "tantivy" (beside Milvus) or "milvus" (Milvus's own BM25);
#: None in dense mode or when vector search was down
LEXICAL_ENGINE = "lexical_engine"
#: the query's weighted terms ([text, weight]) lexical evidence compared
QUERY_TERMS = "query_terms"
RELEVANCE_LEVEL = "relevance_level"
COMPLETENESS_HINT = "completeness_hint"
#: the language the agent was answered in ("zh" or "en", retrieval.agents.language)
AGENT_LANGUAGE = "agent_language"
RETRIEVED_DOMAINS = "retrieved_domains"
RETRIEVED_DOMAINS_BEFORE = "retrieved_domains_before"
DEDUP_REASON = "dedup_reason"
BLOCKED_DOMAIN = "blocked_domain"
RETURNED_DOC_KEYS = "returned_doc_keys"
#: the returned documents' domains, primary first (a generated column reads the first)
RETURNED_DOMAINS = "returned_domains"
WITHHELD_DOC_KEYS = "withheld_doc_keys"
EMBEDDING_MODEL = "embedding_model"
QUERY_VECTOR_CACHED = "query_vector_cached"
L1_CACHED = "l1_cached"
DEGRADED = "degraded"
ACTION_MEMORY = "action_memory"
VECTOR_SEARCH = "vector_search"
#: milliseconds per step: tracker_ms, filter_ms, l0_ms, embed_ms, search_ms, lexical_ms, documents_ms,
#: content_ms, db_ms, total_ms
TIMINGS = "timings"
#: how the level was decided: {"rule": "model:<profile>" or "thresholds", "candidates": every
#: candidate in ranked order with its doc_key, estimate, features, precise, via_l0}
LEVELS = "levels"
#: the call's own metadata_condition as applied ({"logical_operator", "conditions",
#: "matching_documents"}: how many searchable documents of its domains passed); None without one
METADATA_CONDITION = "metadata_condition"
#: a failed lookup records only the query and this
ERROR = "error"

LOOKUP_KEYS = (
    QUERY,
    TOP_K,
    DOMAIN_DEDUP,
    THRESHOLDS,
    L0_MATCH_COUNT,
    L0_TITLES,
    L0_DOC_KEYS,
    L0_TERMS,
    L1_SCORES,
    L1_TOP_SCORE,
    L1_TOP_SIMILARITY,
    L1_CANDIDATES,
    L1_MODE,
    LEXICAL_ENGINE,
    QUERY_TERMS,
    RELEVANCE_LEVEL,
    COMPLETENESS_HINT,
    AGENT_LANGUAGE,
    RETRIEVED_DOMAINS,
    RETRIEVED_DOMAINS_BEFORE,
    DEDUP_REASON,
    BLOCKED_DOMAIN,
    RETURNED_DOC_KEYS,
    RETURNED_DOMAINS,
    WITHHELD_DOC_KEYS,
    EMBEDDING_MODEL,
    QUERY_VECTOR_CACHED,
    L1_CACHED,
    DEGRADED,
    ACTION_MEMORY,
    VECTOR_SEARCH,
    TIMINGS,
    LEVELS,
    METADATA_CONDITION,
)


class LookupRecord(TypedDict):
    """A successful lookup's ``retrieval_details``, key for key (``lookup_details`` builds it)."""

    query: str
    top_k: int
    domain_dedup: str
    thresholds: dict[str, Any]
    l0_match_count: int
    l0_titles: list[str]
    l0_doc_keys: list[str]
    l0_terms: list[str]
    l1_scores: list[float]
    l1_top_score: float | None
    l1_top_similarity: float | None
    l1_candidates: list[dict[str, Any]]
    l1_mode: str | None
    lexical_engine: str | None
    query_terms: list[list[Any]]
    relevance_level: str | None
    completeness_hint: str | None
    agent_language: str
    retrieved_domains: list[str]
    retrieved_domains_before: list[str]
    dedup_reason: str | None
    blocked_domain: str | None
    returned_doc_keys: list[str]
    returned_domains: list[str]
    withheld_doc_keys: list[str]
    embedding_model: str | None
    query_vector_cached: bool
    l1_cached: bool
    degraded: list[str]
    action_memory: str
    vector_search: str
    timings: dict[str, float]
    levels: dict[str, Any]
    metadata_condition: dict[str, Any] | None


def lookup_details(**values: Any) -> LookupRecord:
    """A successful lookup's ``retrieval_details``: every key of ``LOOKUP_KEYS``, no other.
    Raises TypeError naming a key that is missing or not part of the contract."""
    unknown = set(values) - set(LOOKUP_KEYS)
    if unknown:
        raise TypeError(f"not retrieval_details keys: {', '.join(sorted(unknown))}")
    missing = [key for key in LOOKUP_KEYS if key not in values]
    if missing:
        raise TypeError(f"retrieval_details lacks: {', '.join(missing)}")
    return LookupRecord(**{key: values[key] for key in LOOKUP_KEYS})  # type: ignore[typeddict-item]


def failed_lookup_details(*, query: str, error: str) -> dict[str, Any]:
    return {QUERY: query, ERROR: error[:1000]}
