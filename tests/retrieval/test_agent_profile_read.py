"""The agent behind a request is read in one query: its domains and its language come from one
read of its profile (every lookup, MCP call and Dify search pays it), and mean what
``agent_domains`` and ``agent_language`` say."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from knowledge.models import KnowledgeDomain
from retrieval.agents.identity import agent_domains, agent_for_user
from retrieval.agents.language import agent_language
from retrieval.agents.tokens import tool_token_issue
from retrieval.models import AgentProfile

pytestmark = pytest.mark.django_db


def _user(name: str, *, language: str | None = None, domains: tuple[str, ...] = ()):
    token = tool_token_issue(name=name)
    if language is not None or domains:
        profile, _ = AgentProfile.objects.update_or_create(
            user=token.user, defaults={"language": language or ""}
        )
        profile.allowed_domains.set(KnowledgeDomain.objects.get_or_create(domain_id=d)[0] for d in domains)
    return get_user_model().objects.get(pk=token.user_id)  # a fresh row, as a request loads it


@pytest.mark.parametrize(
    "language, domains, expected_language, expected_domains",
    [
        ("en", ("payment", "ops"), "en", frozenset({"payment", "ops"})),
        ("en", (), "en", None),
        ("", ("payment",), None, frozenset({"payment"})),
        (None, (), None, None),  # no profile at all
    ],
)
def test_an_agents_domains_and_language_come_from_one_read_of_its_profile(
    settings, django_assert_num_queries, language, domains, expected_language, expected_domains
):
    settings.AGENT_LANGUAGE = "zh"
    user = _user(f"agent-{language}-{len(domains)}", language=language, domains=domains)

    with django_assert_num_queries(1):
        agent = agent_for_user(user)

    assert (agent.language, agent.domains) == (expected_language, expected_domains)
    # the same answers as the two readers it replaces on the request path
    assert agent.domains == agent_domains(user.pk)
    assert agent.language_in_force == agent_language(user) == (expected_language or "zh")
