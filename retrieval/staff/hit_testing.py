"""Hit testing (as Dify calls it): staff type a query, optionally an agent, its session and some
domains, and see what the lookup would do: L0 matches, L1 candidates as cards with the chunk text,
raw score and similarity, the level and hint the agent would get, and the body itself.

It runs the real lookup (``retrieval.services.lookup_knowledge``) with ``dry_run=True``: the
session is not marked and no invocation is recorded. With an agent chosen the test is that
agent's lookup: its session (action memory is keyed by agent, ``retrieval.agents.identity``), its domain
scope (``retrieval.agents.scopes``) and its language. The domain control limits the test as a scope
does; with a scoped agent only the chosen domains inside its scope are searched. A retrieval
feature, so it lives here; its admin entry sits with the other staff pages in observability.admin
(a proxy model there).
"""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from django import forms
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from config.display import display_json, display_text
from knowledge.models import KnowledgeDomain
from knowledge.vectorstore import get_vector_store
from retrieval.agents.identity import agent_domains
from retrieval.agents.language import agent_language
from retrieval.lookup.inputs import MAX_TOP_K
from retrieval.services import lookup_knowledge
from retrieval.staff.hit_test_cards import candidate_cards, with_threshold_lines

# Characters of an agent's name in the chooser (names are whatever created the user).
AGENT_NAME_CHARS = 60


def agents_queryset():
    """The users that are agents: a tool token or an agent profile (``retrieval.agents.tokens``)."""
    return (
        get_user_model()
        .objects.filter(Q(auth_token__isnull=False) | Q(agent_profile__isnull=False))
        .distinct()
        .order_by(get_user_model().USERNAME_FIELD)
    )


class AgentChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj) -> str:
        name = display_text(obj.get_username())
        return name if len(name) <= AGENT_NAME_CHARS else name[: AGENT_NAME_CHARS - 1] + "…"


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
    domains = forms.ModelMultipleChoiceField(
        label=_("Domains"),
        required=False,
        queryset=KnowledgeDomain.objects.order_by("domain_id"),
        to_field_name="domain_id",
        help_text=_("Search only these domains, as a scoped agent would (none chosen: every domain)."),
        widget=forms.SelectMultiple(attrs={"size": 4}),
    )
    agent = AgentChoiceField(
        label=_("Agent"),
        required=False,
        queryset=agents_queryset(),
        empty_label=_("(no agent)"),
        help_text=_("Test as this agent: its session, its domain scope and its language."),
    )
    session_id = forms.CharField(
        label=_("Session id"),
        required=False,
        max_length=128,
        help_text=_("Optional: what this agent's session would get given what it already retrieved."),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = agents_queryset()  # evaluated per request, not at import

    def clean(self):
        cleaned = super().clean()
        session_id = (cleaned.get("session_id") or "").strip()
        cleaned["session_id"] = session_id
        agent = cleaned.get("agent")
        if session_id and agent is None and "agent" not in self.errors:
            # Every session belongs to an agent (its action memory is keyed by it).
            self.add_error("agent", gettext("Choose the agent whose session this is."))
        chosen = frozenset(d.domain_id for d in cleaned.get("domains") or [])
        scope = agent_domains(agent.pk) if agent is not None else None
        cleaned["scope"] = scope
        cleaned["search_domains"] = _search_domains(chosen, scope)
        if chosen and scope is not None and not cleaned["search_domains"]:
            self.add_error(
                "domains",
                gettext("None of the chosen domains is in this agent's scope (%(scope)s).")
                % {"scope": ", ".join(sorted(scope))},
            )
        return cleaned


def _search_domains(chosen: frozenset[str], scope: frozenset[str] | None) -> frozenset[str] | None:
    """What the test searches: the chosen domains inside the agent's scope (None: every domain)."""
    if chosen and scope is not None:
        return chosen & scope
    return chosen or scope


# The last tests a staff user ran, kept in their Django session (newest first).
RECENT_TESTS = 8


def _recent_tests(request: HttpRequest) -> list[dict]:
    # Tests remembered before agents and domains were part of a test carry no "params": dropped.
    return [t for t in request.session.get("hit_tests", []) if isinstance(t, dict) and "params" in t]


def _remember(request: HttpRequest, test: dict) -> list[dict]:
    recent = [t for t in _recent_tests(request) if t["params"] != test["params"]]
    recent.insert(0, test)
    request.session["hit_tests"] = recent[:RECENT_TESTS]
    return request.session["hit_tests"]


def hit_test_run(
    *,
    query: str,
    session_id: str = "",
    top_k: int | None = None,
    agent=None,
    domains: frozenset[str] | None = None,
) -> dict:
    """One dry-run lookup as ``agent`` (a user, or None) would make it, limited to ``domains``
    (None: every domain); returns the agent's body, the details and the session used."""
    # No session given: a fresh one that has retrieved nothing (and is never marked).
    session = session_id or f"hit-test-{uuid.uuid4().hex[:12]}"
    outcome = lookup_knowledge(
        query=query,
        session_id=session,
        top_k=top_k,
        dry_run=True,
        source="hit_test",
        agent=agent.get_username() if agent is not None else "",
        agent_id=agent.pk if agent is not None else None,
        domains=domains,
        language=agent_language(agent) if agent is not None else None,
    )
    return {
        "body": outcome.body,
        "details": outcome.details,
        "status": outcome.status,
        "session_id": session,
        "session_given": bool(session_id),
    }


def _status_label(status: str) -> str:
    from observability.models import ToolInvocation

    try:
        return ToolInvocation.Status(status).label
    except ValueError:
        return status


def _test_params(request: HttpRequest) -> str:
    """The address of a test, to run it again from "your last tests"."""
    keep = [
        (k, v)
        for k in ("query", "top_k", "agent", "session_id", "domains")
        for v in request.GET.getlist(k)
        if v
    ]
    return urlencode(keep)


def hit_test_page(request: HttpRequest, context: dict) -> TemplateResponse:
    form = HitTestForm(request.GET if "query" in request.GET else None)
    context = {**context, "form": form, "recent_tests": _recent_tests(request)}
    if form.is_valid():
        data = form.cleaned_data
        try:
            result = hit_test_run(
                query=data["query"],
                session_id=data["session_id"],
                top_k=data["top_k"],
                agent=data["agent"],
                domains=data["search_domains"],
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            details = result["details"]
            cards, left_out = candidate_cards(
                details.get("l1_candidates") or [],
                returned=set(details.get("returned_doc_keys") or []),
                withheld=set(details.get("withheld_doc_keys") or []),
                domains=data["search_domains"],
                levels=details.get("levels"),
            )
            thresholds = details.get("thresholds") if isinstance(details.get("thresholds"), dict) else {}
            context.update(
                recent_tests=_remember(
                    request,
                    {
                        "query": data["query"][:300],
                        "params": _test_params(request),
                        "agent": display_text(data["agent"].get_username()) if data["agent"] else "",
                        "level": result["body"].get("relevanceLevel"),
                    },
                ),
                candidate_rows=with_threshold_lines(cards, thresholds, details.get("levels")),
                candidates=cards,
                left_out=left_out,
                agent=data["agent"],
                scope=sorted(data["scope"]) if data["scope"] is not None else None,
                search_domains=sorted(data["search_domains"]) if data["search_domains"] is not None else None,
                result=result,
                status_label=_status_label(result["status"]),
                details=details,
                l0=[
                    (display_text(key), display_text(title))
                    for key, title in zip(
                        details.get("l0_doc_keys") or [], details.get("l0_titles") or [], strict=False
                    )
                ],
                body_json=display_json(result["body"]),
                details_json=display_json(details),
                # what the Milvus deployment supports (asked once per process): why L1 runs as it does
                milvus_capabilities=get_vector_store().capabilities().summary(),
            )
    return TemplateResponse(request, "admin/observability/hit_testing.html", context)
