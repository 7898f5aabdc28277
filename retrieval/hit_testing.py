"""Hit testing (as Dify calls it): staff type a query, optionally a session, and see what the
lookup would do: L0 matches, L1 candidates with raw score and similarity, the level and hint the
agent would get, and the body itself.

It runs the real lookup (``retrieval.services.lookup_knowledge``) with ``dry_run=True``: the
session is not marked and no invocation is recorded. A retrieval feature, so it lives here; its
admin entry sits with the other staff pages in observability.admin (a proxy model there).
"""

from __future__ import annotations

import json
import uuid

from django import forms
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _

from retrieval.services import MAX_TOP_K, lookup_knowledge


class HitTestForm(forms.Form):
    query = forms.CharField(
        label=_("Query"),
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 70, "autofocus": True}),
    )
    top_k = forms.IntegerField(
        label=_("top_k"),
        required=False,
        min_value=1,
        max_value=MAX_TOP_K,
        help_text=_("Candidates fetched from the vector search (empty: the RETRIEVAL_TOP_K setting)."),
        widget=forms.NumberInput(attrs={"style": "width: 6em"}),
    )
    session_id = forms.CharField(
        label=_("Session id"),
        required=False,
        max_length=128,
        help_text=_("Optional: see what this session would get given what it already retrieved."),
    )


# The last tests a staff user ran, kept in their Django session (newest first).
RECENT_TESTS = 8


def _remember(request: HttpRequest, *, query: str, top_k: int | None, level: str | None) -> list[dict]:
    recent = [t for t in request.session.get("hit_tests", []) if t.get("query") != query]
    recent.insert(0, {"query": query[:300], "top_k": top_k, "level": level})
    request.session["hit_tests"] = recent[:RECENT_TESTS]
    return request.session["hit_tests"]


def hit_test_run(*, query: str, session_id: str = "", top_k: int | None = None) -> dict:
    """One dry-run lookup; returns the agent's body, the details and the session used."""
    # No session given: a fresh one that has retrieved nothing (and is never marked).
    session = session_id or f"hit-test-{uuid.uuid4().hex[:12]}"
    outcome = lookup_knowledge(query=query, session_id=session, top_k=top_k, dry_run=True, source="hit_test")
    return {
        "body": outcome.body,
        "details": outcome.details,
        "status": outcome.status,
        "session_id": session,
        "session_given": bool(session_id),
    }


def hit_test_page(request: HttpRequest, context: dict) -> TemplateResponse:
    form = HitTestForm(request.GET if "query" in request.GET else None)
    context = {**context, "form": form, "recent_tests": request.session.get("hit_tests", [])}
    if form.is_valid():
        try:
            result = hit_test_run(
                query=form.cleaned_data["query"],
                session_id=form.cleaned_data["session_id"].strip(),
                top_k=form.cleaned_data["top_k"],
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            details = result["details"]
            returned = set(details.get("returned_doc_keys") or [])
            withheld = set(details.get("withheld_doc_keys") or [])
            candidates = [
                {**c, "returned": c.get("doc_key") in returned, "withheld": c.get("doc_key") in withheld}
                for c in details.get("l1_candidates") or []
            ]
            thresholds = details.get("thresholds") if isinstance(details.get("thresholds"), dict) else {}
            context.update(
                recent_tests=_remember(
                    request,
                    query=form.cleaned_data["query"],
                    top_k=form.cleaned_data["top_k"],
                    level=result["body"].get("relevanceLevel"),
                ),
                candidate_rows=_with_threshold_lines(candidates, thresholds),
                result=result,
                details=details,
                candidates=candidates,
                l0=list(zip(details.get("l0_doc_keys") or [], details.get("l0_titles") or [], strict=False)),
                body_json=json.dumps(result["body"], ensure_ascii=False, indent=2),
                details_json=json.dumps(details, ensure_ascii=False, indent=2),
            )
    return TemplateResponse(request, "admin/observability/hit_testing.html", context)


def _with_threshold_lines(candidates: list[dict], thresholds: dict) -> list[dict]:
    """The candidates (best first) with a line where each threshold falls between them, as
    Dify's and RAGFlow's retrieval tests draw it."""
    lines = sorted(
        (
            (float(thresholds[name]), label)
            for name, label in (("highly_relevant", "HIGHLY_RELEVANT"), ("reference", "REFERENCE"))
            if isinstance(thresholds.get(name), int | float)
        ),
        reverse=True,
    )
    rows: list[dict] = []
    for candidate in candidates:
        similarity = candidate.get("similarity")
        while lines and isinstance(similarity, int | float) and similarity < lines[0][0]:
            value, label = lines.pop(0)
            rows.append({"line": label, "value": value})
        rows.append({"candidate": candidate})
    rows += [{"line": label, "value": value} for value, label in lines]
    return rows
