"""One sentence that says why an invocation got its level, from what its record holds.

Read from ``retrieval_details`` as stored: the thresholds in force at the time (``thresholds``:
reference, highly_relevant and, when recorded, their source), the best similarity, the keyword
(L0) match count and the dedup outcome. Records of any age or shape are read defensively: a
missing or odd value leaves its part of the sentence out instead of failing the page.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext

from observability.metrics import DIFY_TOOL
from observability.records import DEDUP_REASON, DedupReason, RelevanceLevel


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def evidence_text(features: Any) -> str:
    """The level model's evidence of one candidate as staff read it: ``name value`` pairs."""
    if not isinstance(features, dict):
        return ""
    return " · ".join(
        f"{name} {float(value):.2f}" for name, value in features.items() if _number(value) is not None
    )


def level_explanation(*, tool_name: str, status: str, level: str | None, details: Any) -> str:
    details = details if isinstance(details, dict) else {}
    thresholds = details.get("thresholds") if isinstance(details.get("thresholds"), dict) else {}
    reference = _number(thresholds.get("reference"))
    highly = _number(thresholds.get("highly_relevant"))
    similarity = _number(details.get("l1_top_similarity"))
    l0 = details.get("l0_match_count") if isinstance(details.get("l0_match_count"), int) else 0
    if status == "ERROR":
        return gettext("The call failed before any level was decided.")
    if tool_name == DIFY_TOOL:
        returned = details.get("returned_doc_keys")
        n = len(returned) if isinstance(returned, list) else 0
        if n:
            return gettext("Dify call: %(n)d record(s) above Dify's score threshold were returned.") % {
                "n": n
            }
        return gettext("Dify call: no record reached Dify's score threshold.")
    sim = f"{similarity:.2f}" if similarity is not None else None
    ref = f"{reference:.2f}" if reference is not None else "?"
    hr = f"{highly:.2f}" if highly is not None else "?"
    if level == RelevanceLevel.PRECISE:
        return gettext("One keyword match (L0), returned first: PRECISE.")
    if level == RelevanceLevel.DEDUPED:
        if details.get(DEDUP_REASON) == DedupReason.DOMAIN_RETRIEVED:
            return gettext(
                "The best document's domain %(domain)s was already retrieved in this session "
                "(hard domain dedup): DEDUPED."
            ) % {"domain": details.get("blocked_domain") or "?"}
        withheld = details.get("withheld_doc_keys")
        return gettext(
            "Every passing document was already returned to this session (%(n)d withheld): DEDUPED."
        ) % {"n": len(withheld) if isinstance(withheld, list) else 0}
    if level == RelevanceLevel.HIGHLY_RELEVANT and sim is not None:
        return gettext("Best similarity %(sim)s is at or above HIGHLY_RELEVANT %(hr)s: HIGHLY_RELEVANT.") % {
            "sim": sim,
            "hr": hr,
        }
    if level == RelevanceLevel.REFERENCE:
        if sim is not None and (reference is None or similarity >= reference):
            return gettext(
                "Best similarity %(sim)s is at or above REFERENCE %(ref)s and below HIGHLY_RELEVANT "
                "%(hr)s: REFERENCE."
            ) % {"sim": sim, "ref": ref, "hr": hr}
        return gettext("%(n)d keyword matches (L0) without a passing similarity: REFERENCE.") % {
            "n": max(l0, 2)
        }
    if level is None:
        if sim is None:
            return gettext("Neither keyword nor vector search found a candidate, so not found.")
        if reference is None:  # an older record without its thresholds
            return gettext("Best similarity %(sim)s is below the REFERENCE threshold, so not found.") % {
                "sim": sim
            }
        return gettext("Best similarity %(sim)s is below REFERENCE %(ref)s, so not found.") % {
            "sim": sim,
            "ref": ref,
        }
    return gettext("Level %(level)s.") % {"level": level}


def thresholds_source(details: Any) -> str:
    """Where the record's thresholds came from (empty when the record does not say)."""
    thresholds = details.get("thresholds") if isinstance(details, dict) else None
    source = thresholds.get("source") if isinstance(thresholds, dict) else None
    return source if isinstance(source, str) else ""
