"""The admin home says how things are, and the site is agentkb's."""

import pytest
from django.urls import reverse

from knowledge.models import ApiDocument, KnowledgeDomain
from observability.models import ToolInvocation


@pytest.mark.django_db
def test_the_home_page_shows_documents_failures_empty_domains_and_lookups(admin_client):
    KnowledgeDomain.objects.create(domain_id="api")
    empty = KnowledgeDomain.objects.create(domain_id="forgotten")
    ApiDocument.objects.create(doc_key="api/a.md", title="A", domain="api", content="x")
    ApiDocument.objects.create(
        doc_key="api/bad.md",
        title="B",
        domain="api",
        content="x",
        status="FAILED",
        error="parse error: line 3",
    )
    ToolInvocation.objects.create(tool_name="lookup_knowledge", session_id="s", request={"query": "q"})
    ToolInvocation.objects.create(
        tool_name="lookup_knowledge", session_id="s", request={"query": "q"}, relevance_level="PRECISE"
    )
    response = admin_client.get(reverse("admin:index"))
    html = response.content.decode()
    assert "agentkb administration" in html and "Django administration" not in html
    assert 'href="/api/docs/"' in html  # "View site"
    assert "parse error: line 3" in html and 'id="overview-failing"' in html
    assert reverse("admin:knowledge_knowledgedomain_delete", args=[empty.pk]) in html
    assert "2 lookups in the last day" in html
