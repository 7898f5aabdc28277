"""The document status endpoint the list polls, and the re-index button."""

import pytest
from django.urls import reverse

from knowledge.models import ApiDocument


@pytest.mark.django_db
def test_status_json_reports_the_asked_documents(admin_client):
    doc = ApiDocument.objects.create(
        doc_key="a/b.md", title="B", domain="a", content="x", status="FAILED", error="bad"
    )
    response = admin_client.get(reverse("admin:knowledge_apidocument_status"), {"ids": f"{doc.pk},999"})
    assert response.json() == {
        "documents": {
            str(doc.pk): {
                "status": "FAILED",
                "label": "Failed",
                "error": "bad",
                "chunk_count": doc.chunk_count,
            }
        }
    }
    assert admin_client.get(reverse("admin:knowledge_apidocument_status"), {"ids": "x"}).status_code == 400


@pytest.mark.django_db
def test_status_json_is_for_staff(client):
    response = client.get(reverse("admin:knowledge_apidocument_status"))
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.django_db
def test_the_reindex_button_queues_indexing(admin_client, django_capture_on_commit_callbacks):
    doc = ApiDocument.objects.create(
        doc_key="a/c.md", title="C", domain="a", content="x", status="FAILED", error="bad"
    )
    page = admin_client.get(reverse("admin:knowledge_apidocument_change", args=[doc.pk])).content.decode()
    assert 'id="reindex-form"' in page
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = admin_client.post(reverse("admin:knowledge_apidocument_reindex", args=[doc.pk]))
    assert response.status_code == 302 and len(queued) == 1
    doc.refresh_from_db()
    assert (doc.status, doc.error) == ("PENDING", "")
    assert admin_client.get(reverse("admin:knowledge_apidocument_reindex", args=[doc.pk])).status_code == 405
