"""Reads of the knowledge app: the planner's knowledge map (seed 004 Part B).

The map lists every domain that has INDEXED documents, with its planner guidance and each
document's title and covers. It goes into the planner prompt only, never the executor's.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from django.conf import settings

from knowledge.models import ApiDocument, KnowledgeDomain

KNOWLEDGE_MAP_PLACEHOLDER = "{{ knowledge_map }}"


def knowledge_map_build() -> dict:
    """``{"available_knowledge_domains": [{domain_id, description, when_to_retrieve, documents:
    [{title, covers}]}]}``, domains by id, documents by title. Two queries whatever the size."""
    documents_by_domain: dict[str, list[dict]] = {}
    rows = (
        ApiDocument.objects.filter(status=ApiDocument.Status.INDEXED)
        .order_by("domain", "title", "doc_key")
        .values_list("domain", "title", "metadata")
    )
    for domain_id, title, metadata in rows:
        covers = (metadata or {}).get("covers") or []
        if not isinstance(covers, list):
            covers = [covers]
        documents_by_domain.setdefault(domain_id, []).append(
            {"title": title, "covers": [str(c) for c in covers]}
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
    return {"available_knowledge_domains": domains}


def knowledge_map_yaml(knowledge_map: dict | None = None) -> str:
    """The map as the seed's YAML (Chinese kept readable, keys in the seed's order)."""
    data = knowledge_map_build() if knowledge_map is None else knowledge_map
    # libyaml's emitter when PyYAML has it: about 10x faster than the pure-Python one on big maps.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(
        data, Dumper=dumper, allow_unicode=True, sort_keys=False, default_flow_style=False, width=1000
    )


def _template_path(name: str) -> Path:
    for folder in settings.TEMPLATES[0]["DIRS"]:
        candidate = Path(folder) / name
        if candidate.exists():
            return candidate
    raise FileNotFoundError(name)


def planner_prompt_render(knowledge_map: dict | None = None, language: str | None = None) -> str:
    """The planner prompt, in the agent's language (None: AGENT_LANGUAGE), with the knowledge map
    (YAML) injected at its placeholder.

    Plain substitution, not the Django template engine: the prompt is Markdown for an LLM and
    must not be HTML-escaped.
    """
    from retrieval.agent_texts import prompt_template  # the agent-facing texts live in retrieval

    template = _template_path(prompt_template("planner", language)).read_text(encoding="utf-8")
    return template.replace(KNOWLEDGE_MAP_PLACEHOLDER, knowledge_map_yaml(knowledge_map).rstrip("\n"))
