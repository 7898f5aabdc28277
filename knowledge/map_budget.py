"""Fit the planner's knowledge map into ``PLANNER_MAP_MAX_CHARS`` (its YAML size).

At 2,000 documents the whole map is about 230,000 characters, far past any prompt. Above the
budget every domain stays (its id, description and when_to_retrieve: what the planner decides
with) and lists its most useful documents, the rest as a count (``more_documents``). Documents
are added round-robin across domains, most useful first, while the map fits, so a big domain
cannot crowd the small ones out. If even the domains alone are over the budget, each domain's
when_to_retrieve is shortened evenly rather than any domain dropped.

"Most useful" within a domain: the documents whose covers name more scenarios, then the larger
ones (more chunks), then by title: a document the planner can match a question to is worth the
characters.
"""

from __future__ import annotations

import yaml

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_ELLIPSIS = "…"


def yaml_size(data) -> int:
    return len(
        yaml.dump(
            data, Dumper=_DUMPER, allow_unicode=True, sort_keys=False, default_flow_style=False, width=1000
        )
    )


def document_rank(document: dict) -> tuple:
    return (-len(document.get("covers") or []), -int(document.get("_chunks") or 0), document.get("title", ""))


def map_fit(domains: list[dict], *, max_chars: int) -> list[dict]:
    """``domains`` (each with its full ``documents`` list, ranked or not) cut to ``max_chars``.
    ``max_chars`` <= 0: no budget. Documents may carry a private ``_chunks`` key (dropped)."""
    full = [{**d, "documents": [_public(doc) for doc in d["documents"]]} for d in domains]
    if max_chars <= 0 or yaml_size({"available_knowledge_domains": full}) <= max_chars:
        return full
    ranked = [sorted(d["documents"], key=document_rank) for d in domains]
    heads = [{k: v for k, v in d.items() if k != "documents"} for d in domains]
    heads = _shorten_guidance(heads, ranked, max_chars=max_chars)

    # Size of the map with no documents listed, each domain saying how many it has.
    listed = [0] * len(domains)
    size = yaml_size({"available_knowledge_domains": _assemble(heads, ranked, listed)})
    costs = [[yaml_size([_public(doc)]) + 2 for doc in docs] for docs in ranked]  # +2: deeper indent
    progress = True
    while progress:
        progress = False
        for i, docs in enumerate(ranked):
            if listed[i] >= len(docs):
                continue
            if size + costs[i][listed[i]] > max_chars:
                continue
            size += costs[i][listed[i]]
            listed[i] += 1
            progress = True
    result = _assemble(heads, ranked, listed)
    # The per-entry estimate can be a few characters off (the "documents: []" / count lines):
    # take documents back from the longest lists until it truly fits.
    while yaml_size({"available_knowledge_domains": result}) > max_chars and any(listed):
        longest = max(range(len(listed)), key=lambda j: listed[j])
        listed[longest] -= 1
        result = _assemble(heads, ranked, listed)
    return result


def _public(document: dict) -> dict:
    return {k: v for k, v in document.items() if not k.startswith("_")}


def _assemble(heads: list[dict], ranked: list[list[dict]], listed: list[int]) -> list[dict]:
    out = []
    for head, docs, n in zip(heads, ranked, listed, strict=True):
        entry = {**head, "documents": [_public(doc) for doc in docs[:n]]}
        if len(docs) > n:
            entry["more_documents"] = len(docs) - n
        out.append(entry)
    return out


def _shorten_guidance(heads: list[dict], ranked: list[list[dict]], *, max_chars: int) -> list[dict]:
    """Shorten every domain's when_to_retrieve (then description) evenly until the domains alone fit."""
    listed = [0] * len(heads)
    if yaml_size({"available_knowledge_domains": _assemble(heads, ranked, listed)}) <= max_chars:
        return heads
    limit = max((len(h.get("when_to_retrieve") or "") for h in heads), default=0)
    heads = [dict(h) for h in heads]
    while limit > 0:
        limit = limit * 3 // 4
        for head in heads:
            for key in ("when_to_retrieve", "description"):
                text = head.get(key) or ""
                if len(text) > limit:
                    head[key] = text[:limit] + _ELLIPSIS if limit else ""
        if yaml_size({"available_knowledge_domains": _assemble(heads, ranked, listed)}) <= max_chars:
            break
    return heads
