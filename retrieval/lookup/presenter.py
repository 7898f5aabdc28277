"""What the agent reads (FS-4): the lookup's body, camelCase, without a score; and the one-line
summary staff see for a call."""

from __future__ import annotations

from typing import Any

from observability import records as keys
from retrieval.lookup.normalisation import RelevanceLevel


def agent_body(
    *,
    found: bool,
    items: list[dict],
    level: RelevanceLevel | None,
    hint: str | None,
    domains_after: list[str],
    message: str,
) -> dict[str, Any]:
    """found, primary, supplement, relevanceLevel, completenessHint, retrievedDomainsThisSession,
    message: exactly what the agent gets."""
    return {
        "found": found,
        "primary": items[0] if items else None,
        "supplement": items[1:],
        "relevanceLevel": level.value if level else None,
        "completenessHint": hint,
        "retrievedDomainsThisSession": domains_after,
        "message": message,
    }


def invocation_summary(body: dict, details: dict) -> str:
    level = details[keys.RELEVANCE_LEVEL]
    if body["found"]:
        extra = f" +{len(body['supplement'])} supplement" if body["supplement"] else ""
        return f"{level}: {body['primary']['docKey']}{extra}"
    if level:
        withheld = ", ".join(details[keys.WITHHELD_DOC_KEYS][:5])
        return f"{level} ({details[keys.DEDUP_REASON]}): withheld {withheld}"
    return "not found"
