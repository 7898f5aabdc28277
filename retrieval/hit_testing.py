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

from retrieval.services import lookup_knowledge


class HitTestForm(forms.Form):
    query = forms.CharField(
        label=_("Query"), max_length=2000, widget=forms.TextInput(attrs={"size": 60, "autofocus": True})
    )
    session_id = forms.CharField(
        label=_("Session id"),
        required=False,
        max_length=128,
        help_text=_("Optional: see what this session would get given what it already retrieved."),
    )


def hit_test_run(*, query: str, session_id: str = "") -> dict:
    """One dry-run lookup; returns the agent's body, the details and the session used."""
    # No session given: a fresh one that has retrieved nothing (and is never marked).
    session = session_id or f"hit-test-{uuid.uuid4().hex[:12]}"
    outcome = lookup_knowledge(query=query, session_id=session, dry_run=True, source="hit_test")
    return {
        "body": outcome.body,
        "details": outcome.details,
        "status": outcome.status,
        "session_id": session,
        "session_given": bool(session_id),
    }


def hit_test_page(request: HttpRequest, context: dict) -> TemplateResponse:
    form = HitTestForm(request.GET if "query" in request.GET else None)
    context = {**context, "form": form}
    if form.is_valid():
        try:
            result = hit_test_run(
                query=form.cleaned_data["query"], session_id=form.cleaned_data["session_id"].strip()
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
            context.update(
                result=result,
                details=details,
                candidates=candidates,
                l0=list(zip(details.get("l0_doc_keys") or [], details.get("l0_titles") or [], strict=False)),
                body_json=json.dumps(result["body"], ensure_ascii=False, indent=2),
                details_json=json.dumps(details, ensure_ascii=False, indent=2),
            )
    return TemplateResponse(request, "admin/observability/hit_testing.html", context)
