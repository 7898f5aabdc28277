"""Reads of the knowledge app: which documents are searchable, and the planner's knowledge map
(seed 004 Part B).

Searchable means "has an indexed version" (``documents_searchable``): INDEXED, or being
re-indexed (PENDING / INDEXING) or failed a re-index after an earlier version was indexed. The
earlier version's chunks and vectors stay until the new ones are swapped in, so such a document
keeps answering at its previous version. L0, the L1 candidate filter, the corpus signature and
the knowledge map all read this one predicate.

The map lists every domain that has searchable documents, with its planner guidance and each
document's title and covers. It goes into the planner prompt only, never the executor's (``retrieval.selectors``).
"""

from __future__ import annotations

import yaml
from django.conf import settings
from django.db.models import Count, Q, QuerySet

from knowledge.map_budget import map_fit
from knowledge.models import ApiDocument, DocumentChunk, KnowledgeDomain

#: "has an indexed version": every version agentkb indexes sets ``indexed_at`` and a re-index
#: keeps it (rows adopted from the original service get theirs in migration 0006). One indexed
#: column rather than "status = INDEXED OR ...": the corpus signature's count is then answered
#: from that index alone (an OR made SQLite visit the rows, 2.5 times slower at 10,000).
SEARCHABLE = Q(indexed_at__isnull=False)


def documents_searchable() -> QuerySet[ApiDocument]:
    """Documents lookups may return (see the module docstring)."""
    return ApiDocument.objects.filter(SEARCHABLE)


def chunk_counts_by_domain() -> dict[str, int]:
    """How many chunks the searchable documents of each domain hold: one grouped count."""
    rows = (
        DocumentChunk.objects.filter(document__in=documents_searchable())
        .order_by()
        .values_list("document__domain")
        .annotate(n=Count("id"))
    )
    return {domain: n for domain, n in rows}


def chunk_count_of(doc_keys: frozenset[str], domains: frozenset[str] | None = None) -> int:
    """How many chunks these searchable documents hold (of ``domains`` only, when given)."""
    documents = documents_searchable().filter(doc_key__in=sorted(doc_keys))
    if domains is not None:
        documents = documents.filter(domain__in=sorted(domains))
    return DocumentChunk.objects.filter(document__in=documents).count()


def domain_ids_with_documents(*, searchable_only: bool = False) -> list[str]:
    """The distinct domains documents are in (only searchable documents' when asked), sorted."""
    documents = documents_searchable() if searchable_only else ApiDocument.objects.all()
    return sorted(set(documents.order_by().values_list("domain", flat=True).distinct()))


def domain_ids_known() -> list[str]:
    """Every domain with a knowledge_domain row or a document, sorted."""
    return sorted(
        set(KnowledgeDomain.objects.values_list("domain_id", flat=True)) | set(domain_ids_with_documents())
    )


def knowledge_map_build(*, max_chars: int | None = None) -> dict:
    """``{"available_knowledge_domains": [{domain_id, description, when_to_retrieve, documents:
    [{title, covers}], more_documents?}]}``, domains by id, documents by title. Two queries
    whatever the size. Within ``max_chars`` of YAML (default ``PLANNER_MAP_MAX_CHARS``; 0 = no
    budget): every domain kept, each listing its most useful documents and a count of the rest
    (``knowledge.map_budget``)."""
    documents_by_domain: dict[str, list[dict]] = {}
    rows = (
        documents_searchable()
        .order_by("domain", "title", "doc_key")
        .values_list("domain", "title", "metadata", "chunk_count")
    )
    for domain_id, title, metadata, chunk_count in rows:
        covers = (metadata or {}).get("covers") or []
        if not isinstance(covers, list):
            covers = [covers]
        documents_by_domain.setdefault(domain_id, []).append(
            {"title": title, "covers": [str(c) for c in covers], "_chunks": chunk_count}
        )

    guidance = {
        row.domain_id: row
        for row in KnowledgeDomain.objects.filter(domain_id__in=documents_by_domain).only(
            "domain_id", "description", "when_to_retrieve"
        )
    }
    domains = []
    for domain_id in sorted(documents_by_domain):
        row = guidance.get(domain_id)
        domains.append(
            {
                "domain_id": domain_id,
                "description": (row.description or "") if row else "",
                "when_to_retrieve": (row.when_to_retrieve or "") if row else "",
                "documents": documents_by_domain[domain_id],
            }
        )
    budget = settings.PLANNER_MAP_MAX_CHARS if max_chars is None else max_chars
    return {"available_knowledge_domains": map_fit(domains, max_chars=budget)}


def knowledge_map_yaml(knowledge_map: dict | None = None) -> str:
    """The map as the seed's YAML (Chinese kept readable, keys in the seed's order)."""
    data = knowledge_map_build() if knowledge_map is None else knowledge_map
    # libyaml's emitter when PyYAML has it: about 10x faster than the pure-Python one on big maps.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(
        data, Dumper=dumper, allow_unicode=True, sort_keys=False, default_flow_style=False, width=1000
    )
