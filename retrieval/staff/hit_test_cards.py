"""The candidate cards of a hit test: each L1 chunk hit with the chunk's own text, as Dify's and
RAGFlow's retrieval tests show it.

A dry-run lookup's ``l1_candidates`` name each chunk (doc_key, chunk_index) with its scores; the
text, heading path and pages are read from ``DocumentChunk`` in one query. Every string is made
safe for the page here (``config.display``): chunk text is whatever a document held.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.urls import reverse

from config.display import display_text
from knowledge.models import ApiDocument, DocumentChunk
from observability.explain import evidence_text

#: characters of a chunk shown on its card (the whole chunk opens below it, up to CHUNK_FULL_CHARS)
CHUNK_PREVIEW_CHARS = 400
CHUNK_FULL_CHARS = 20_000


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def candidate_cards(
    candidates: list[dict],
    *,
    returned: set[str],
    withheld: set[str],
    domains: frozenset[str] | None,
    levels: dict | None = None,
) -> tuple[list[dict], int]:
    """(cards, left out): one card per candidate inside ``domains`` (None: every domain), best
    first, and how many candidates fell outside them (the scope filter runs after the search)."""
    inside = [
        c for c in candidates if isinstance(c, dict) and (domains is None or c.get("domain") in domains)
    ]
    keys = {c.get("doc_key") for c in inside if isinstance(c.get("doc_key"), str)}
    indexes = {c.get("chunk_index") for c in inside if isinstance(c.get("chunk_index"), int)}
    chunks = {
        (row.document.doc_key, row.chunk_index): row
        for row in DocumentChunk.objects.filter(
            Q(document__doc_key__in=keys) & Q(chunk_index__in=indexes)
        ).select_related("document")
    }
    documents = dict(ApiDocument.objects.filter(doc_key__in=keys).values_list("doc_key", "pk"))
    # the level model's estimate of each document and the evidence behind it (details["levels"])
    estimates = {e.get("doc_key"): e for e in (levels or {}).get("candidates") or [] if isinstance(e, dict)}
    cards = []
    for rank, c in enumerate(inside, start=1):
        key = c.get("doc_key") if isinstance(c.get("doc_key"), str) else ""
        chunk = chunks.get((key, c.get("chunk_index")))
        text = display_text(chunk.content if chunk else "")
        cards.append(
            {
                "rank": rank,
                "doc_key": display_text(key),
                "document_url": (
                    reverse("admin:knowledge_apidocument_change", args=[documents[key]])
                    if key in documents
                    else ""
                ),
                "title": display_text(c.get("title")),
                "domain": display_text(c.get("domain")),
                "chunk_index": c.get("chunk_index"),
                "heading_path": display_text(chunk.heading_path if chunk else ""),
                "pages": display_text(chunk.pages if chunk else ""),
                "preview": text
                if len(text) <= CHUNK_PREVIEW_CHARS
                else text[: CHUNK_PREVIEW_CHARS - 1] + "…",
                "full_text": text[:CHUNK_FULL_CHARS] if len(text) > CHUNK_PREVIEW_CHARS else "",
                "chunk_missing": chunk is None,
                "similarity": _number(c.get("similarity")),
                "score": _number(c.get("score")),
                "level": display_text(c.get("l1_level")),
                "estimate": _number((estimates.get(key) or {}).get("estimate")),
                "evidence": display_text(evidence_text((estimates.get(key) or {}).get("features"))),
                "returned": key in returned,
                "withheld": key in withheld,
                "indexed": bool(c.get("indexed")),
            }
        )
    return cards, len(candidates) - len(inside)


def with_threshold_lines(cards: list[dict], thresholds: dict, levels: dict | None = None) -> list[dict]:
    """The cards (best first) with a line where each threshold falls between them, as Dify's and
    RAGFlow's retrieval tests draw it. Under the level model (``levels["rule"]`` "model:...")
    the lines are its bands and a card is placed by its estimate, not its similarity: the level
    is decided from the estimate."""
    by_model = str((levels or {}).get("rule") or "").startswith("model:")
    if by_model:
        from retrieval.lookup.level_model import BANDS

        lines = [(floor, level.value) for floor, level in BANDS]
    else:
        lines = sorted(
            (
                (float(thresholds[name]), label)
                for name, label in (("highly_relevant", "HIGHLY_RELEVANT"), ("reference", "REFERENCE"))
                if _number(thresholds.get(name)) is not None
            ),
            reverse=True,
        )
    rows: list[dict] = []
    cards = sorted(cards, key=lambda c: -(c.get("estimate") or 0.0)) if by_model else cards
    for card in cards:
        similarity = card.get("estimate") if by_model else card.get("similarity")
        while lines and similarity is not None and similarity < lines[0][0]:
            value, label = lines.pop(0)
            rows.append({"line": label, "value": value})
        rows.append({"candidate": card})
    rows += [{"line": label, "value": value} for value, label in lines]
    return rows
