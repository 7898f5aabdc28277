"""PDF, DOCX, HTML, PPTX, XLSX and CSV through the real pipeline (admin upload, eager worker,
real embedder and milvus-lite): converted, chunked with headings, tables and page numbers;
hostile files refused with their reason and nothing left behind (rows and Milvus counted);
the original kept for download; the same bytes again are "unchanged"."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge.models import ApiDocument, DocumentChunk, DocumentOriginal
from knowledge.services.documents import UNCHANGED, document_ingest
from tests.support import documents as files

pytestmark = pytest.mark.django_db(transaction=True)

BULK = reverse("admin:knowledge_apidocument_bulk_upload")


def zip_upload(members: dict[str, bytes]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return SimpleUploadedFile("kb.zip", buffer.getvalue(), content_type="application/zip")


def test_a_zip_of_pdf_docx_html_and_a_scan_indexes_three_and_fails_the_scan_with_its_reason(
    admin_client, vector_store
):
    upload_bytes = {
        "payment/handbook.pdf": files.pdf_bytes(pages=3),
        "ops/deploy.docx": files.docx_bytes(),
        "infra/redis.html": files.html_bytes(),
        "payment/scan.pdf": files.scanned_pdf_bytes(),
    }
    upload = zip_upload(upload_bytes)
    response = admin_client.post(BULK, {"files": [upload]})
    assert response.status_code == 200
    assert {r["name"]: r["outcome"] for r in response.context["results"]} == {
        "payment/handbook.pdf": "added",
        "ops/deploy.docx": "added",
        "infra/redis.html": "added",
        "payment/scan.pdf": "added",
    }

    statuses = dict(ApiDocument.objects.values_list("doc_key", "status"))
    assert statuses == {
        "payment/handbook.pdf": "INDEXED",
        "ops/deploy.docx": "INDEXED",
        "infra/redis.html": "INDEXED",
        "payment/scan.pdf": "FAILED",
    }
    scan = ApiDocument.objects.get(doc_key="payment/scan.pdf")
    assert scan.error == "no text layer (scanned document?)"
    assert scan.chunks.count() == 0 and vector_store.count(doc_key="payment/scan.pdf") == 0

    pdf = ApiDocument.objects.get(doc_key="payment/handbook.pdf")
    assert (pdf.title, pdf.domain, pdf.metadata["keywords"], pdf.metadata["page_count"]) == (
        "支付失败排查手册",
        "payment",
        ["支付失败", "ERR_PAY_TIMEOUT"],
        3,
    )
    chunks = list(pdf.chunks.order_by("chunk_index"))
    assert vector_store.count(doc_key=pdf.doc_key) == len(chunks) == pdf.chunk_count
    assert {c.pages for c in chunks} == {"1", "2", "3"}
    table_chunk = next(c for c in chunks if "| ERR_PAY_TIMEOUT | 支付超时 | 重试 |" in c.content)
    assert table_chunk.pages == "1" and table_chunk.heading_path == "第1章 支付超时 Chapter 1"
    assert next(c for c in chunks if "page-marker-3" in c.content).pages == "3"

    docx = ApiDocument.objects.get(doc_key="ops/deploy.docx")
    assert docx.title == "部署手册"
    paths = set(docx.chunks.values_list("heading_path", flat=True))
    assert "部署手册 > 准备工作 > 回滚步骤" in paths
    assert docx.chunks.filter(content__contains="| timeout | 30s |").exists()
    assert set(docx.chunks.values_list("pages", flat=True)) == {""}

    html = ApiDocument.objects.get(doc_key="infra/redis.html")
    assert html.title == "Redis 缓存集群" and html.metadata["keywords"] == ["redis", "缓存集群"]
    assert html.chunks.filter(heading_path="Redis 缓存集群 > 故障切换").exists()

    # The change page shows the converted Markdown beside the chunks, with their pages, and
    # links the original for download.
    page = admin_client.get(reverse("admin:knowledge_apidocument_change", args=[pdf.pk])).content.decode()
    assert "&lt;!-- page 2 --&gt;" in page and "<th>pages</th>" in page
    download = admin_client.get(reverse("admin:knowledge_apidocument_original", args=[pdf.pk]))
    assert download.status_code == 200
    assert download.content == bytes(DocumentOriginal.objects.get(document=pdf).data)
    assert download.content.startswith(b"%PDF-") and download.content == upload_bytes["payment/handbook.pdf"]
    assert download["Content-Disposition"].startswith("attachment;")


def test_the_original_is_kept_byte_for_byte_and_the_same_bytes_again_are_unchanged(vector_store):
    data = files.docx_bytes()
    document_ingest(data=data, name="ops/deploy.docx", domain="ops")
    document = ApiDocument.objects.get(doc_key="ops/deploy.docx")
    assert bytes(document.original.data) == data and document.original.file_name == "deploy.docx"
    indexed_at = document.indexed_at

    again = document_ingest(data=data, name="ops/deploy.docx", domain="ops")

    assert again.outcome == UNCHANGED
    assert ApiDocument.objects.get(pk=document.pk).indexed_at == indexed_at


@pytest.mark.parametrize(
    "name, make, reason",
    [
        ("d/locked.pdf", lambda: files.pdf_bytes(encrypt=True), "is an encrypted PDF"),
        ("d/bomb.docx", files.docx_zip_bomb_bytes, "a zip bomb?"),
        ("d/xxe.docx", files.docx_xxe_bytes, "declares a DOCTYPE or XML entities"),
        ("d/lies.pdf", files.docx_bytes, "the extension does not match the content"),
        ("d/lies.html", files.pdf_bytes, "the extension does not match the content"),
    ],
)
def test_a_hostile_file_is_refused_at_upload_and_leaves_no_row_and_no_vector(
    admin_client, vector_store, name, make, reason
):
    upload = zip_upload({"d/ok.md": "# 正常文档\n\n正文。".encode(), name: make()})
    response = admin_client.post(BULK, {"files": [upload]})

    rows = {r["name"]: r for r in response.context["results"]}
    assert rows[name]["outcome"] == "failed" and reason in rows[name]["error"]
    assert list(ApiDocument.objects.values_list("doc_key", flat=True)) == ["d/ok.md"]
    assert DocumentOriginal.objects.count() == 1
    assert vector_store.count() == vector_store.count(doc_key="d/ok.md") > 0


@pytest.mark.parametrize(
    "make, reason, memory_mb",
    [
        (files.many_pages_pdf_bytes, "has 10,000 pages; the limit is 2,000 (INGEST_MAX_PDF_PAGES)", 1024),
        pytest.param(
            files.pdf_decompression_bomb_bytes, "INGEST_CONVERT_MEMORY_MB", 256, marks=pytest.mark.slow
        ),
    ],
)
def test_a_file_only_the_converter_can_judge_fails_in_the_worker_with_no_chunk_and_no_vector(
    vector_store, settings, make, reason, memory_mb
):
    settings.INGEST_CONVERT_MEMORY_MB = memory_mb
    document_ingest(data=make(), name="d/hostile.pdf", domain="d")

    document = ApiDocument.objects.get(doc_key="d/hostile.pdf")
    assert document.status == ApiDocument.Status.FAILED and reason in document.error
    assert document.indexed_at is None and document.content == ""
    assert not DocumentChunk.objects.exists()
    assert vector_store.count() == 0


def test_pptx_xlsx_and_csv_are_indexed_with_a_table_per_sheet_and_slides_as_pages(vector_store):
    for name, data in (
        ("biz/review.pptx", files.pptx_bytes()),
        ("biz/codes.xlsx", files.xlsx_bytes()),
        ("biz/cities.csv", files.csv_bytes()),
    ):
        document_ingest(data=data, name=name, domain="biz")

    assert set(ApiDocument.objects.values_list("status", flat=True)) == {"INDEXED"}
    deck = ApiDocument.objects.get(doc_key="biz/review.pptx")
    assert set(deck.chunks.values_list("pages", flat=True)) == {"1", "2"}
    sheets = ApiDocument.objects.get(doc_key="biz/codes.xlsx")
    assert set(sheets.chunks.values_list("heading_path", flat=True)) == {"错误码", "值班表"}
    assert (
        ApiDocument.objects.get(doc_key="biz/cities.csv").chunks.get().content.startswith("| 城市 | 区号 |")
    )
    assert vector_store.count() == DocumentChunk.objects.count()


def test_a_converted_file_replaced_by_one_that_fails_keeps_its_indexed_version(vector_store):
    document_ingest(data=files.pdf_bytes(pages=2), name="p/guide.pdf", domain="p")
    before = ApiDocument.objects.get(doc_key="p/guide.pdf")
    chunk_count = before.chunk_count

    document_ingest(data=files.scanned_pdf_bytes(), name="p/guide.pdf", domain="p")

    after = ApiDocument.objects.get(doc_key="p/guide.pdf")
    assert after.status == ApiDocument.Status.FAILED and after.error == "no text layer (scanned document?)"
    assert after.content == before.content and after.indexed_at == before.indexed_at
    assert after.chunks.count() == chunk_count == vector_store.count(doc_key="p/guide.pdf")
