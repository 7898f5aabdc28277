"""Domain scopes: what an agent limited to some domains may see (``AgentProfile.allowed_domains``).

``domains`` is always a frozenset of domain ids, or None for "every domain". A scoped agent's
lookups, knowledge map, planner prompt, MCP tools and Dify searches see only documents of its
domains; nothing it receives names another domain (withheld documents and "already retrieved"
domains included), even a domain it retrieved before its scope was narrowed.
"""

from __future__ import annotations

from collections.abc import Iterable

from retrieval.agents.tracker import SessionRetrievals


def domain_allowed(domain: str, domains: frozenset[str] | None) -> bool:
    return domains is None or domain in domains


def domains_scoped(names: Iterable[str], domains: frozenset[str] | None) -> list[str]:
    """``names`` (in order) without those outside the scope."""
    return [name for name in names if domain_allowed(name, domains)]


def memory_scoped(memory: SessionRetrievals, domains: frozenset[str] | None) -> SessionRetrievals:
    """A session's action memory as a scoped agent may see it."""
    if domains is None:
        return memory
    kept = {d: docs for d, docs in memory.domains.items() if d in domains}
    visible = {doc for docs in kept.values() for doc in docs}
    return SessionRetrievals(kept, {d: c for d, c in memory.chunks_sent.items() if d in visible})


def knowledge_map_scoped(knowledge_map: dict, domains: frozenset[str] | None) -> dict:
    """The knowledge map (``knowledge.selectors.knowledge_map_build``) with only the scope's domains."""
    if domains is None:
        return knowledge_map
    return {
        **knowledge_map,
        "available_knowledge_domains": [
            d for d in knowledge_map["available_knowledge_domains"] if d["domain_id"] in domains
        ],
    }


def agent_knowledge_map(user) -> dict:
    """The knowledge map as the agent ``user`` may see it."""
    from knowledge.selectors import knowledge_map_build
    from retrieval.agents.identity import agent_domains

    return knowledge_map_scoped(knowledge_map_build(), agent_domains(user.pk))


def profiles_left_unscoped_by(domain_ids: Iterable[str]) -> list:
    """The agent profiles whose every allowed domain is among ``domain_ids``: deleting those
    domains would leave their scope empty, and an empty scope means every domain. Deleting a
    domain must never widen what an agent sees, so those deletions are refused
    (``retrieval.signals``, the domains admin)."""
    from django.db.models import Count, F, Q

    from retrieval.models import AgentProfile

    doomed = list(domain_ids)
    return list(
        AgentProfile.objects.annotate(
            scope=Count("allowed_domains", distinct=True),
            doomed=Count("allowed_domains", filter=Q(allowed_domains__domain_id__in=doomed), distinct=True),
        )
        .filter(doomed__gt=0, doomed=F("scope"))
        .select_related("user")
        .order_by("user__username")
    )


def scope_deletion_message(profiles: list) -> str:
    from django.utils.translation import gettext

    names = ", ".join(p.user.get_username() for p in profiles[:5]) + (" …" if len(profiles) > 5 else "")
    return gettext(
        "it is the only allowed domain of these agents: %(names)s. An empty scope means every "
        "domain, so remove it from their allowed domains (or give them another) first"
    ) % {"names": names}


#: At most this many domains in one call's ``domains`` filter (the knowledge map lists few).
MAX_FILTER_DOMAINS = 50


def call_domains_clean(requested, scope: frozenset[str] | None) -> frozenset[str] | None:
    """One call's ``domains`` filter, narrowed to the agent's scope: the domains the lookup may
    search (None: the whole scope). ValidationError naming ``domains`` for a malformed filter or a
    domain the agent cannot search; an unknown domain and one outside the scope get the same
    message, so a scoped agent learns nothing about the domains it cannot see."""
    from django.core.exceptions import ValidationError

    from knowledge.models import ApiDocument, KnowledgeDomain

    if requested is None:
        return scope
    if isinstance(requested, str):
        requested = [requested]
    if not isinstance(requested, list | tuple) or not all(isinstance(d, str) for d in requested):
        raise ValidationError({"domains": ["Must be a list of domain ids (strings)."]})
    wanted = [d.strip() for d in requested if d.strip()]
    if not wanted:
        raise ValidationError({"domains": ["Must name at least one domain, or be left out."]})
    if len(wanted) > MAX_FILTER_DOMAINS:
        raise ValidationError({"domains": [f"Ensure this list has at most {MAX_FILTER_DOMAINS} domains."]})
    # A domain is known by its row (the domains admin) or by a document filed under it.
    known = set(KnowledgeDomain.objects.filter(domain_id__in=wanted).values_list("domain_id", flat=True))
    known |= set(ApiDocument.objects.filter(domain__in=wanted).values_list("domain", flat=True).distinct())
    refused = [d for d in dict.fromkeys(wanted) if d not in known or not domain_allowed(d, scope)]
    if refused:
        names = ", ".join(repr(d[:64]) for d in refused[:10])
        raise ValidationError(
            {"domains": [f"Not a domain this agent can search: {names} (the knowledge map lists them)."]}
        )
    return frozenset(wanted)
