"""Tool invocations shaped like the ones the lookup service records (seed 000 section 6)."""

from __future__ import annotations

import factory
from django.utils import timezone

from observability.models import ToolInvocation

HINTS = {
    "PRECISE": "知识库中不存在比上述结果更精准的文档",
    "HIGHLY_RELEVANT": "当前结果已高度相关，继续检索不太可能找到更精准的文档",
    "REFERENCE": "当前结果为相关参考，如需更精准信息请明确缺少的具体维度",
}


def lookup_details(
    *,
    level: str | None,
    similarity: float | None,
    domains: list[str] | None = None,
    dedup_reason: str | None = None,
    query: str = "",
) -> dict:
    """retrieval_details as the lookup service writes them."""
    top_score = None if similarity is None else round(2.0 * (1.0 - similarity), 4)
    domains = domains or []
    return {
        "query": query,
        "l0_titles": [],
        "l0_match_count": 1 if level == "PRECISE" else 0,
        "l1_scores": [] if top_score is None else [top_score],
        "l1_top_score": top_score,
        "l1_top_similarity": similarity,
        "relevance_level": level,
        "completeness_hint": HINTS.get(level or "", ""),
        "retrieved_domains": domains,
        "dedup_reason": dedup_reason,
        "returned_doc_keys": [f"{d}/doc.md" for d in domains] if level not in (None, "DEDUPED") else [],
        "withheld_doc_keys": [f"{d}/doc.md" for d in domains] if level == "DEDUPED" else [],
        "returned_domains": domains if level not in (None, "DEDUPED") else [],
        "embedding_model": "use-multilingual",
        "timings": {"embed_ms": 3, "search_ms": 5, "total_ms": 9},
    }


class ToolInvocationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ToolInvocation

    class Params:
        similarity = 0.8
        domains = factory.LazyFunction(lambda: ["infrastructure"])
        query = factory.Sequence(lambda n: f"数据库连接池配置 {n}")

    session_id = factory.Sequence(lambda n: f"session-{n}")
    tool_name = "lookup_knowledge"
    status = ToolInvocation.Status.SUCCESS
    duration_ms = 20
    created_at = factory.LazyFunction(timezone.now)
    relevance_level = "HIGHLY_RELEVANT"
    dedup_reason = None
    request = factory.LazyAttribute(lambda o: {"query": o.query, "session_id": o.session_id})
    retrieval_details = factory.LazyAttribute(
        lambda o: lookup_details(
            level=o.relevance_level,
            similarity=o.similarity,
            domains=o.domains,
            dedup_reason=o.dedup_reason,
            query=o.query,
        )
    )
