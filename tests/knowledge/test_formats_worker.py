"""Converted formats through the real Celery worker (service-backed run): the conversion runs in a
child process of the worker's pool process; a hostile file costs that child, and the same worker
goes on indexing the next upload."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge.models import ApiDocument, DocumentChunk
from tests.knowledge.test_indexing_worker import wait_until_settled
from tests.support import documents as files

BULK = reverse("admin:knowledge_apidocument_bulk_upload")


def zip_upload(members: dict[str, bytes]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return SimpleUploadedFile("kb.zip", buffer.getvalue())


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_worker_converts_formats_and_survives_a_hostile_pdf(vector_store, celery_worker, admin_client):
    response = admin_client.post(
        BULK,
        {
            "files": [
                zip_upload(
                    {
                        "payment/handbook.pdf": files.pdf_bytes(pages=3),
                        "ops/deploy.docx": files.docx_bytes(),
                        "payment/scan.pdf": files.scanned_pdf_bytes(),
                        "ops/huge.pdf": files.many_pages_pdf_bytes(10_000),
                    }
                )
            ]
        },
    )
    assert response.context["counts"]["added"] == 4
    wait_until_settled(timeout=180)

    statuses = dict(ApiDocument.objects.values_list("doc_key", "status"))
    assert statuses == {
        "payment/handbook.pdf": "INDEXED",
        "ops/deploy.docx": "INDEXED",
        "payment/scan.pdf": "FAILED",
        "ops/huge.pdf": "FAILED",
    }, celery_worker.log_path.read_text()[-3000:]
    assert ApiDocument.objects.get(doc_key="ops/huge.pdf").error.startswith("has 10,000 pages")
    assert set(
        DocumentChunk.objects.filter(document__doc_key="payment/handbook.pdf").values_list("pages", flat=True)
    ) == {"1", "2", "3"}
    assert vector_store.count(doc_key="ops/huge.pdf") == vector_store.count(doc_key="payment/scan.pdf") == 0
    assert vector_store.count() == DocumentChunk.objects.count()

    # the same worker process still indexes (nothing took it down)
    admin_client.post(BULK, {"files": [zip_upload({"ops/after.html": files.html_bytes()})]})
    wait_until_settled(timeout=120)
    assert ApiDocument.objects.get(doc_key="ops/after.html").status == ApiDocument.Status.INDEXED
    assert celery_worker.poll() is None
