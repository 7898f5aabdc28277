"""Indexing by the real Celery worker (service-backed run: MariaDB, Redis, the shared milvus-lite
server), and the worker's start-up check of the embedding model against the collection."""

import io
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge.models import ApiDocument, DocumentChunk, KnowledgeDomain
from knowledge.tasks.indexing import EmbeddingMismatchRefused, _refuse_mismatched_collection
from tests.conftest import REPO, SERVICES_MODE, stop_process

BULK = reverse("admin:knowledge_apidocument_bulk_upload")
DEMO = REPO / "knowledge" / "demo_corpus"


def make_zip(files: dict[str, str]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return SimpleUploadedFile("kb.zip", buffer.getvalue())


def wait_until_settled(*, timeout: float = 90.0) -> None:
    """Until no document is PENDING/INDEXING (the worker reports through the status column)."""
    deadline = time.monotonic() + timeout
    while ApiDocument.objects.filter(status__in=["PENDING", "INDEXING"]).exists():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"still indexing after {timeout}s: {list(ApiDocument.objects.values('doc_key', 'status'))}"
            )
        time.sleep(0.2)


def chunk_ids() -> set[str]:
    return {c.chunk_id for c in DocumentChunk.objects.select_related("document")}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_real_worker_indexes_uploads_and_cleans_up_after_reupload_and_delete(
    vector_store, celery_worker, admin_client
):
    files = {f"payment/{p.name}": p.read_text() for p in sorted((DEMO / "payment").glob("*.md"))}
    response = admin_client.post(BULK, {"files": [make_zip(files)]})
    assert response.context["counts"]["added"] == 3

    wait_until_settled()
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {"INDEXED"}, (
        celery_worker.log_path.read_text()
    )
    assert vector_store.chunk_ids() == chunk_ids()  # counted in the Milvus the worker wrote to
    assert b"knowledge.index_document" in celery_worker.log_path.read_bytes()  # the worker did it

    # Re-upload one document much shorter, delete another: no orphan vectors afterwards.
    files["payment/refund-guide.md"] = "---\ndomain: payment\n---\n# 退款处理指南\n\n只剩一段。"
    admin_client.post(
        BULK, {"files": [make_zip({"payment/refund-guide.md": files["payment/refund-guide.md"]})]}
    )
    doomed = ApiDocument.objects.get(doc_key="payment/payment-callback-signature.md")
    admin_client.post(reverse("admin:knowledge_apidocument_delete", args=[doomed.pk]), {"post": "yes"})

    wait_until_settled()
    assert ApiDocument.objects.get(doc_key="payment/refund-guide.md").chunk_count == 1
    assert vector_store.chunk_ids() == chunk_ids()
    assert (
        vector_store.count()
        == 1 + ApiDocument.objects.get(doc_key="payment/payment-failure-handbook.md").chunk_count
    )
    assert KnowledgeDomain.objects.get(domain_id="payment").document_count == 2


@pytest.mark.django_db
def test_the_start_up_check_refuses_a_collection_of_another_model_and_names_the_fix(vector_store):
    _refuse_mismatched_collection()  # no collection yet: fine, the first indexing creates it

    vector_store.ensure_collection(dim=512, model_name="use-multilingual-v3")
    _refuse_mismatched_collection()  # the configured model: fine

    vector_store.drop()
    vector_store.ensure_collection(dim=1024, model_name="bge-m3:BAAI/bge-m3")
    with pytest.raises(EmbeddingMismatchRefused, match=r"1024-d .* 512-d .* reindex --recreate"):
        _refuse_mismatched_collection()


@pytest.mark.django_db
def test_the_start_up_check_refuses_a_collection_built_before_hybrid_search(vector_store):
    from tests.knowledge.test_vectorstore import _old_schema_collection

    _old_schema_collection(vector_store, dim=512)
    vector_store.client().alter_collection_properties(
        vector_store.collection, properties={"agentkb.embedding_model": "use-multilingual-v3"}
    )
    with pytest.raises(EmbeddingMismatchRefused, match=r"before hybrid search .*text.*reindex --recreate"):
        _refuse_mismatched_collection()


@pytest.mark.services
def test_a_worker_refuses_to_start_on_a_collection_of_another_model(vector_store, settings, tmp_path):
    assert SERVICES_MODE
    vector_store.ensure_collection(dim=1024, model_name="bge-m3:BAAI/bge-m3")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "MILVUS_URI": settings.MILVUS_URI,
        "MILVUS_COLLECTION": settings.MILVUS_COLLECTION,
        "AGENTKB_VAR_DIR": str(tmp_path),
    }
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "celery"), "-A", "config", "worker", "-Q", "refused-test",
             "--concurrency", "1", "--without-gossip", "--without-mingle"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            returncode = proc.wait(timeout=90)
        finally:
            stop_process(proc)
    text = log.read_text()
    assert returncode != 0, text
    assert "refused to start" in text and "reindex --recreate" in text
    assert "ready." not in text  # it never took a task
