"""Helpers for the domain-map tests: indexed documents made with the ORM (as the ingestion
pipeline leaves them) and a scripted LLM that answers document and domain prompts."""

from __future__ import annotations

import hashlib
import json

from django.utils import timezone

from knowledge.models import ApiDocument

DOCUMENT_PROMPT_MARK = "retrieval metadata for one document"
DOMAIN_PROMPT_MARK = "planner guidance of one knowledge domain"


def indexed_document(
    *,
    doc_key: str,
    domain: str,
    title: str | None = None,
    content: str | None = None,
    covers: list[str] | None = None,
    when_to_retrieve: str | None = None,
    keywords: list[str] | None = None,
    status: str = ApiDocument.Status.INDEXED,
) -> ApiDocument:
    """A document as ingestion stores it; frontmatter covers / when_to_retrieve are "manual"."""
    title = title or doc_key.rsplit("/", 1)[-1]
    content = content if content is not None else f"# {title}\n\n## Overview\n\nText of {title}.\n"
    metadata: dict = {"keywords": keywords or []}
    if covers is not None:
        metadata.update(covers=covers, covers_source="manual")
    if when_to_retrieve is not None:
        metadata.update(when_to_retrieve=when_to_retrieve, when_to_retrieve_source="manual")
    return ApiDocument.objects.create(
        doc_key=doc_key,
        title=title,
        domain=domain,
        content=content,
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
        metadata=metadata,
        status=status,
        indexed_at=timezone.now() if status == ApiDocument.Status.INDEXED else None,
    )


def prompt_kind(body: dict) -> str:
    """ "document" or "domain": which summary a chat-completions request asks for."""
    system = body["messages"][0]["content"]
    if DOCUMENT_PROMPT_MARK in system:
        return "document"
    if DOMAIN_PROMPT_MARK in system:
        return "domain"
    return "other"


def good_answers(body: dict) -> str:
    """A well-behaved LLM: valid JSON for either prompt, naming what it was given."""
    user = body["messages"][-1]["content"]
    if prompt_kind(body) == "document":
        title = user.split("Title: ", 1)[1].split("\n", 1)[0]
        return json.dumps({"covers": [f"{title} scenario"], "when_to_retrieve": f"LLM: when {title} matters"})
    return json.dumps({"when_to_retrieve": "LLM: domain guidance", "description": "LLM: domain description"})


def calls_of(fake, kind: str) -> int:
    return sum(1 for r in fake.chat_requests() if prompt_kind(r.body) == kind)
