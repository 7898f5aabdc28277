"""Who is calling: the agent behind a tool token, and what it is allowed to see.

An agent is the Django user its tool token belongs to (``retrieval.agents.tokens``). Everything an agent
keeps between calls is its own: the action memory of a session id is keyed by the agent
(``memory_session_key``), so two agents that both say ``conv-42`` never see, clear or starve each
other; feedback and throttle budgets are per agent too. Staff limit an agent to some domains on
its ``AgentProfile`` (``retrieval.agents.scopes`` applies the limit).
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.models import KnowledgeDomain
from retrieval.agents.language import default_language, language_normalise
from retrieval.agents.tracker.base import memory_session_key


@dataclass(frozen=True)
class Agent:
    """``id`` is the user's primary key (None for a caller without a token: the ``lookup``
    command, stdio MCP); ``domains`` the domains it may see (None: every domain); ``language``
    the one its profile names ("zh" / "en"; None: the global ``AGENT_LANGUAGE``)."""

    id: int | None
    name: str
    domains: frozenset[str] | None = None
    budget_id: str = ""  # the throttle budget's key (retrieval.agents.throttling.agent_budget_id)
    language: str | None = None

    @property
    def language_in_force(self) -> str:
        """The language this agent is spoken to in (``retrieval.agents.language.agent_language``'s rule)."""
        return self.language or default_language()

    def memory_key(self, session_id: str) -> str:
        return memory_session_key(agent_id=self.id, agent=self.name, session_id=session_id)


def agent_domains(user_id: int) -> frozenset[str] | None:
    """The domains agent ``user_id`` is limited to, or None when it may see every domain (no
    profile, or a profile without domains). One query."""
    domains = frozenset(
        KnowledgeDomain.objects.filter(agentprofile__user_id=user_id).values_list("domain_id", flat=True)
    )
    return domains or None


def agent_for_user(user) -> Agent:
    """The agent of an authenticated request's user (a token's owner, or staff using the API
    with their admin session: staff are agents like any other there). Its profile (domains and
    language) is read in one query: every agent request pays it."""
    from retrieval.agents.throttling import agent_budget_id
    from retrieval.models import AgentProfile

    language, domains = None, set()
    rows = AgentProfile.objects.filter(user_id=user.pk).values_list("language", "allowed_domains__domain_id")
    for profile_language, domain_id in rows:  # a row per allowed domain (one, None, when none)
        language = language_normalise(profile_language)
        if domain_id is not None:
            domains.add(domain_id)
    return Agent(
        id=user.pk,
        name=user.get_username(),
        domains=frozenset(domains) or None,
        budget_id=agent_budget_id(user),
        language=language,
    )


def agent_named(name: str) -> Agent:
    """A caller without a token (stdio MCP, the ``lookup`` command): every domain, its own
    sessions, keyed by name."""
    return Agent(id=None, name=name)
