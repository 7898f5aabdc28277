import pytest
from django.urls import reverse

from knowledge.models import ApiDocument, KnowledgeDomain
from observability.models import ToolInvocation


@pytest.fixture
def seeded(db):
    KnowledgeDomain.objects.create(domain_id="infrastructure", description="Infra")
    doc = ApiDocument.objects.create(
        doc_key="infra/db.md", title="DB pool", domain="infrastructure", content="x", content_hash="h"
    )
    inv = ToolInvocation.objects.create(
        session_id="s1", tool_name="lookup_knowledge", relevance_level="PRECISE"
    )
    return doc, inv


@pytest.mark.parametrize(
    "model", ["knowledge_knowledgedomain", "knowledge_apidocument", "observability_toolinvocation"]
)
def test_admin_changelists_render(admin_client, seeded, model):
    response = admin_client.get(reverse(f"admin:{model}_changelist"))
    assert response.status_code == 200


def test_tool_invocations_are_read_only(admin_client, seeded):
    _, inv = seeded
    assert admin_client.get(reverse("admin:observability_toolinvocation_add")).status_code == 403
    page = admin_client.get(reverse("admin:observability_toolinvocation_change", args=[inv.pk]))
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    admin_client.post(
        reverse("admin:observability_toolinvocation_change", args=[inv.pk]), {"session_id": "changed"}
    )
    inv.refresh_from_db()
    assert inv.session_id == "s1"


def test_anonymous_is_sent_to_login(client, seeded):
    response = client.get(reverse("admin:observability_toolinvocation_changelist"))
    assert response.status_code == 302 and "/login/" in response["Location"]
