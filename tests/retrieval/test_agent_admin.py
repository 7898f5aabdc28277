"""Staff manage agents in the admin: the domains an agent may see (on the agent, where its token
is), and every agent's sessions, by agent."""

import uuid

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from knowledge.models import KnowledgeDomain
from retrieval.agents.tokens import tool_token_issue
from retrieval.models import AgentProfile
from tests.retrieval.conftest import seed_documents

pytestmark = pytest.mark.django_db


def test_staff_limit_an_agent_to_domains_in_the_admin_and_its_lookups_follow(admin_client, corpus):
    seed_documents(corpus)
    api = KnowledgeDomain.objects.create(domain_id="api")
    KnowledgeDomain.objects.create(domain_id="infrastructure")
    token = tool_token_issue(name=f"agent-{uuid.uuid4().hex[:6]}")
    profile = AgentProfile.objects.get(user=token.user)  # created with the token

    url = reverse("admin:retrieval_agentprofile_change", args=[profile.pk])
    assert admin_client.get(url).status_code == 200
    response = admin_client.post(url, {"user": token.user.pk, "allowed_domains": [api.pk], "language": "en"})
    assert response.status_code == 302, response.content.decode()[:2000]
    profile.refresh_from_db()
    assert [d.domain_id for d in profile.allowed_domains.all()] == ["api"] and profile.language == "en"

    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = agent.post(
        "/api/tools/lookup_knowledge", {"query": "数据库连接池配置", "session_id": "s"}, format="json"
    ).json()
    assert body["found"] is False

    listing = admin_client.get(reverse("admin:retrieval_agentprofile_changelist")).content.decode()
    assert token.user.username in listing and "api" in listing


def test_staff_see_each_agents_sessions_by_agent(admin_client, corpus):
    seed_documents(corpus)
    agents = []
    for name in ("alpha", "beta"):
        token = tool_token_issue(name=f"{name}-{uuid.uuid4().hex[:6]}")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        client.post(
            "/api/tools/lookup_knowledge", {"query": "ERR_TIMEOUT", "session_id": "conv-42"}, format="json"
        )
        agents.append(token.user)
    client.post(
        "/api/tools/lookup_knowledge", {"query": "ERR_TIMEOUT", "session_id": f"only-{name}"}, format="json"
    )

    alpha = admin_client.get(
        reverse("admin:retrieval_agentprofile_change", args=[agents[0].agent_profile.pk])
    ).content.decode()
    beta = admin_client.get(
        reverse("admin:retrieval_agentprofile_change", args=[agents[1].agent_profile.pk])
    ).content.decode()
    assert 'id="agent-sessions"' in alpha and "conv-42" in alpha and "only-beta" not in alpha
    assert "conv-42" in beta and "only-beta" in beta
    # Each session's action memory, read under its own agent.
    assert "1 documents in 1 domains" in alpha
    # The link lists that agent's calls in that session.
    assert f"agent__id__exact={agents[0].pk}&amp;session_id=conv-42" in alpha
    listing = admin_client.get(
        reverse("admin:observability_toolinvocation_changelist")
        + f"?agent__id__exact={agents[0].pk}&session_id=conv-42"
    )
    assert listing.status_code == 200


def test_deleting_a_scoped_agents_only_domain_is_refused_so_its_scope_never_widens(admin_client):
    """An empty scope means every domain: deleting the one domain an agent is limited to would let
    it see everything. The admin refuses and says why; code gets a ProtectedError; once the
    domain leaves the scope (or another joins it) the domain can go."""
    from django.db import transaction
    from django.db.models import ProtectedError

    api = KnowledgeDomain.objects.create(domain_id="api")
    infra = KnowledgeDomain.objects.create(domain_id="infrastructure")
    token = tool_token_issue(name=f"scoped-{uuid.uuid4().hex[:6]}")
    profile = AgentProfile.objects.get(user=token.user)
    profile.allowed_domains.set([api])

    url = reverse("admin:knowledge_knowledgedomain_delete", args=[api.pk])
    page = admin_client.get(url).content.decode()
    assert "only allowed domain" in page and token.user.username in page
    assert admin_client.post(url, {"post": "yes"}).status_code == 200  # the refusal page again
    bulk = admin_client.post(
        reverse("admin:knowledge_knowledgedomain_changelist"),
        {"action": "delete_selected", "_selected_action": [api.pk, infra.pk], "post": "yes"},
    )
    assert "only allowed domain" in bulk.content.decode()
    assert KnowledgeDomain.objects.filter(pk__in=[api.pk, infra.pk]).count() == 2
    with pytest.raises(ProtectedError, match="only allowed domain"), transaction.atomic():
        api.delete()

    infra.delete()  # in no scope: deleted as before
    profile.allowed_domains.set([])
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not KnowledgeDomain.objects.filter(pk=api.pk).exists()
