"""Hostile uploads through the bulk page, as staff would send them: every bad file gets a clear
reason, and nothing of it is stored (no document row, no chunk, no vector).

Each case here is a file inside a zip (a row of its own in the result) or a zip that breaks a
rule (the whole upload refused). Encodings and frontmatter rules themselves are unit-tested in
tests/knowledge/test_parsing.py; limits and the deflate bomb in test_admin_documents.py.
"""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import ApiDocument, DocumentChunk
from tests.knowledge.test_admin_documents import BULK, make_zip

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = "---\ndomain: payment\n---\n# 退款\n\n退款三个工作日内到账。"
LAUGHS = "---\ndomain: d\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b]\n---\n# t\n\ntext"


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "file: is empty"),
        (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
            "its bytes are a PNG image; the extension does not match the content",
        ),
        ("# 标题\n\n正文".encode("utf-16"), "file: is binary or UTF-16"),
        (b"caf\xe9 \xff\xfe \x81\x30", "file: is neither UTF-8 nor GB18030"),
        (b"---\ntitle: [broken\ndomain: d\n---\n# t\n\ntext", "frontmatter: invalid YAML at line"),
        (b"---\ndomain: d\n# never closed\n\ntext", "frontmatter: starts with '---' but has no closing"),
        (
            ("---\ndomain: d\nnotes: '" + "x" * 70_000 + "'\n---\n# t\n\ntext").encode(),
            "frontmatter: is 70019 characters long; at most 65536",
        ),
        (LAUGHS.encode(), "frontmatter"),
        (b"---\ndomain: d\nkeywords: {a: 1}\n---\n# t\n\ntext", "keywords: must be a list of strings"),
        (b"---\ndomain: [d]\n---\n# t\n\ntext", "domain: must be a string"),
        (b"---\ndomain: d\n---\n", "file: has no text besides its frontmatter"),
    ],
)
def test_a_bad_file_in_a_zip_is_a_failed_row_with_its_reason_and_stores_nothing(
    admin_client, vector_store, data, reason
):
    response = admin_client.post(BULK, {"files": [make_zip({"payment/ok.md": GOOD, "d/bad.md": data})]})

    assert response.status_code == 200
    rows = {row["name"]: row for row in response.context["results"]}
    assert rows["d/bad.md"]["outcome"] == "failed"
    assert reason in rows["d/bad.md"]["error"], rows["d/bad.md"]
    # Only the good file is stored; the bad one left nothing anywhere
    assert list(ApiDocument.objects.values_list("doc_key", flat=True)) == ["payment/ok.md"]
    assert not DocumentChunk.objects.filter(document__doc_key="d/bad.md").exists()
    assert vector_store.chunk_ids() == vector_store.chunk_ids(doc_key="payment/ok.md") != set()


def _zip_with_raw_names(names: list[str]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            info = zipfile.ZipInfo(name)
            archive.writestr(info, GOOD)
    return SimpleUploadedFile("kb.zip", buffer.getvalue(), content_type="application/zip")


@pytest.mark.parametrize(
    "names, message",
    [
        (["payment/ok.md", "../../etc/evil.md"], "climbs out of its folder"),
        (["payment/ok.md", "payment/../../evil.md"], "climbs out of its folder"),
        (["payment/ok.md", "..\\..\\evil.md"], "climbs out of its folder"),
        (["payment/ok.md", "payment/ok.md"], "two files are named 'payment/ok.md'"),
        (["payment/OK.md", "payment/./OK.md"], "two files are named 'payment/OK.md'"),
    ],
)
def test_a_zip_with_climbing_or_duplicate_paths_is_refused_whole(admin_client, vector_store, names, message):
    response = admin_client.post(BULK, {"files": [_zip_with_raw_names(names)]})
    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors["files"])
    assert ApiDocument.objects.count() == 0 and vector_store.count() == 0


def test_two_uploaded_files_with_one_name_are_refused(admin_client, vector_store):
    files = [SimpleUploadedFile("a.md", GOOD.encode()), SimpleUploadedFile("a.md", GOOD.encode())]
    response = admin_client.post(BULK, {"files": files})
    assert "two files are named 'a.md'" in " ".join(response.context["form"].errors["files"])
    assert ApiDocument.objects.count() == 0


def test_a_zip_inside_a_zip_is_not_unpacked(admin_client, vector_store):
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("d/bomb.md", b"0" * 5_000_000)
    response = admin_client.post(
        BULK, {"files": [make_zip({"payment/ok.md": GOOD, "d/inner.zip": inner.getvalue()})]}
    )
    rows = {row["name"]: row for row in response.context["results"]}
    assert rows["d/inner.zip"]["outcome"] == "failed"
    assert list(ApiDocument.objects.values_list("doc_key", flat=True)) == ["payment/ok.md"]
