"""Admin upload end to end, through the Django test client as staff use it: the add form, the bulk
page (files and zips), limits, retry, replace and delete. Vectors are counted in Milvus."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge.embeddings import get_embedder
from knowledge.models import ApiDocument, KnowledgeDomain

pytestmark = pytest.mark.django_db(transaction=True)

ADD = reverse("admin:knowledge_apidocument_add")
BULK = reverse("admin:knowledge_apidocument_bulk_upload")
CHANGELIST = reverse("admin:knowledge_apidocument_changelist")


def upload(name: str, text: str | bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode() if isinstance(text, str) else text)


def make_zip(files: dict[str, str | bytes]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return SimpleUploadedFile("kb.zip", buffer.getvalue(), content_type="application/zip")


POOL = "# 数据库连接池配置\n\n## 推荐配置\n\n最大连接数 20。\n\n## 连接耗尽\n\n先查慢 SQL。"


def test_the_add_form_stores_a_file_into_a_new_domain_and_indexes_it(admin_client, vector_store):
    response = admin_client.post(
        ADD, {"file": upload("pool.md", POOL), "domain_choice": "", "new_domain": "infrastructure"}
    )

    doc = ApiDocument.objects.get(doc_key="pool.md")
    assert response.status_code == 302 and response.url == reverse(
        "admin:knowledge_apidocument_change", args=[doc.pk]
    )
    assert (doc.title, doc.domain, doc.status) == (
        "数据库连接池配置",
        "infrastructure",
        ApiDocument.Status.INDEXED,
    )
    assert vector_store.count(doc_key="pool.md") == doc.chunk_count == 2
    assert KnowledgeDomain.objects.get(domain_id="infrastructure").document_count == 1
    page = admin_client.get(response.url).content.decode()
    assert "“pool.md”: added" in page and "最大连接数 20" in page  # outcome message and chunk text


def test_the_add_form_offers_existing_domains_and_a_doc_key(admin_client, vector_store):
    KnowledgeDomain.objects.create(domain_id="payment")
    admin_client.post(
        ADD,
        {
            "file": upload("x.md", "# Refunds\n\ntext"),
            "domain_choice": "payment",
            "key": "payment/refunds.md",
        },
    )
    assert ApiDocument.objects.get(doc_key="payment/refunds.md").domain == "payment"


@pytest.mark.parametrize(
    "name, data, field, message",
    [
        ("x.md", b"caf\xe9 \xff\xfe", "file", "neither UTF-8 nor GB18030"),
        ("x.md", b"---\ntitle: [broken\n---\ntext", "file", "frontmatter: invalid YAML at line"),
        ("x.md", b"# No domain\n\ntext", "domain_choice", "none was chosen at upload"),
        ("x.rtf", b"{\\rtf1 text}", "file", "not a supported format"),
        ("x.pdf", b"PK\x03\x04 not a pdf", "file", "the extension does not match the content"),
        ("x.pdf", b"%PDF-1.4 no domain", "domain_choice", "choose one at upload"),
    ],
)
def test_the_add_form_shows_bad_files_as_field_errors_and_stores_nothing(
    admin_client, vector_store, name, data, field, message
):
    response = admin_client.post(ADD, {"file": upload(name, data), "domain_choice": ""})
    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.errors[field])
    assert ApiDocument.objects.count() == 0


def test_a_file_over_the_size_limit_is_refused_naming_the_setting(admin_client, vector_store, settings):
    settings.INGEST_MAX_FILE_BYTES = 100
    response = admin_client.post(ADD, {"file": upload("big.md", "x" * 101), "new_domain": "d"})
    assert "INGEST_MAX_FILE_BYTES" in " ".join(response.context["adminform"].form.errors["file"])
    assert ApiDocument.objects.count() == 0


def test_a_zip_of_a_folder_tree_becomes_documents_in_its_folders_domains(admin_client, vector_store):
    archive = make_zip(
        {
            "payment/refunds.md": "# 退款处理指南\n\n退款到账需要 1~3 个工作日。",
            "payment/sub/callbacks.md": "# Callbacks\n\nVerify the signature.",
            "infrastructure/moved.md": "---\ndomain: troubleshooting\n---\n# 503 after deploy\n\nreadiness probe",
            "top-level.txt": "plain text at the top of the zip",
            "payment/diagram.png": b"\x89PNG\r\n\x1a\n",
            "__MACOSX/payment/._refunds.md": b"\x00\x05\x16\x07",
            "payment/broken.md": b"\xff\xfe\x00b\x00a\x00d",
        }
    )
    response = admin_client.post(BULK, {"files": [archive], "new_domain": ""})

    assert response.status_code == 200
    domains = dict(ApiDocument.objects.values_list("doc_key", "domain"))
    assert domains == {
        "payment/refunds.md": "payment",
        "payment/sub/callbacks.md": "payment",
        "infrastructure/moved.md": "troubleshooting",  # the frontmatter wins over the folder
    }
    rows = {row["name"]: row for row in response.context["results"]}
    assert set(rows) == {*domains, "top-level.txt", "payment/diagram.png", "payment/broken.md"}
    assert rows["top-level.txt"]["outcome"] == "failed" and "choose one" in rows["top-level.txt"]["error"]
    assert "not a supported format" in rows["payment/diagram.png"]["error"]
    assert "binary or UTF-16" in rows["payment/broken.md"]["error"]
    assert response.context["counts"] == {"added": 3, "updated": 0, "unchanged": 0, "failed": 3}
    assert all(d.status == ApiDocument.Status.INDEXED for d in ApiDocument.objects.all())
    assert vector_store.count() == sum(ApiDocument.objects.values_list("chunk_count", flat=True))
    page = response.content.decode()
    assert "3 added, 0 updated, 0 unchanged, 3 failed" in page and "not a supported format" in page


def test_the_chosen_domain_applies_to_files_without_frontmatter_domain(admin_client, vector_store):
    response = admin_client.post(
        BULK,
        {
            "files": [
                upload("a.md", "# A\n\ntext a"),
                upload("b.txt", "text b"),
                make_zip({"x/c.md": "# C\n\nc"}),
            ],
            "new_domain": "ops",
        },
    )
    assert response.context["counts"]["added"] == 3
    assert set(ApiDocument.objects.values_list("domain", flat=True)) == {"ops"}


def test_uploading_the_same_files_again_reports_them_unchanged(admin_client, vector_store):
    files = {"payment/a.md": "# A\n\ntext", "payment/b.md": "# B\n\ntext"}
    admin_client.post(BULK, {"files": [make_zip(files)]})
    files["payment/b.md"] = "# B\n\nchanged text"
    response = admin_client.post(BULK, {"files": [make_zip(files)]})
    assert response.context["counts"] == {"added": 0, "updated": 1, "unchanged": 1, "failed": 0}


@pytest.mark.parametrize(
    "setting, value, files, message",
    [
        (
            "INGEST_MAX_FILES_PER_UPLOAD",
            2,
            {f"d/{i}.md": "x" for i in range(3)},
            "INGEST_MAX_FILES_PER_UPLOAD",
        ),
        (
            "INGEST_MAX_UNZIPPED_BYTES",
            1000,
            {"d/a.md": "x" * 600, "d/b.md": "y" * 600},
            "INGEST_MAX_UNZIPPED_BYTES",
        ),
        ("INGEST_MAX_FILE_BYTES", 500, {"d/a.md": "x" * 100, "d/b.md": "y" * 600}, "INGEST_MAX_FILE_BYTES"),
        (None, None, {"d/a.md": "x", "../../etc/evil.md": "x"}, "climbs out of its folder"),
        (None, None, {"d/a.md": "x", "d//a.md": "y"}, "two files are named 'd/a.md'"),
    ],
)
def test_a_limit_violation_rejects_the_whole_upload_and_stores_nothing(
    admin_client, vector_store, settings, setting, value, files, message
):
    if setting:
        setattr(settings, setting, value)
    response = admin_client.post(BULK, {"files": [make_zip(files)]})
    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors["files"])
    assert ApiDocument.objects.count() == 0 and vector_store.count() == 0


def test_a_zip_bomb_is_refused_before_it_is_unpacked(admin_client, vector_store, settings):
    settings.INGEST_MAX_UNZIPPED_BYTES = 10_000_000
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("d/bomb.md", b"0" * 20_000_000)  # 20 MB that compresses to ~20 KB
    response = admin_client.post(BULK, {"files": [SimpleUploadedFile("bomb.zip", buffer.getvalue())]})
    assert "INGEST_MAX_UNZIPPED_BYTES" in " ".join(response.context["form"].errors["files"])
    assert ApiDocument.objects.count() == 0


def test_a_file_that_is_not_a_zip_is_refused(admin_client, vector_store):
    response = admin_client.post(BULK, {"files": [upload("kb.zip", "not a zip")]})
    assert "not a valid zip file" in " ".join(response.context["form"].errors["files"])


def test_failed_documents_show_their_reason_and_can_be_retried(admin_client, vector_store, monkeypatch):
    embedder = get_embedder()
    with monkeypatch.context() as patch:
        patch.setattr(
            embedder, "_encode", lambda texts: (_ for _ in ()).throw(RuntimeError("encoder crashed"))
        )
        admin_client.post(ADD, {"file": upload("a.md", "# A\n\ntext"), "new_domain": "d"})
    doc = ApiDocument.objects.get(doc_key="a.md")
    assert doc.status == ApiDocument.Status.FAILED
    assert "encoder crashed" in admin_client.get(CHANGELIST).content.decode()

    response = admin_client.post(
        CHANGELIST, {"action": "retry_indexing", "_selected_action": [doc.pk]}, follow=True
    )

    assert "Indexing queued for 1 document." in response.content.decode()
    doc.refresh_from_db()
    assert doc.status == ApiDocument.Status.INDEXED and doc.error == ""
    assert vector_store.count(doc_key="a.md") == 1


def test_deleting_in_the_admin_removes_vectors_and_chunks(admin_client, vector_store):
    admin_client.post(BULK, {"files": [make_zip({"d/a.md": POOL, "d/b.md": "# B\n\nb"})]})
    a = ApiDocument.objects.get(doc_key="d/a.md")

    admin_client.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [a.pk], "post": "yes"})
    assert vector_store.count(doc_key="d/a.md") == 0 and vector_store.count() == 1

    b = ApiDocument.objects.get(doc_key="d/b.md")
    admin_client.post(reverse("admin:knowledge_apidocument_delete", args=[b.pk]), {"post": "yes"})
    assert vector_store.count() == 0 and ApiDocument.objects.count() == 0
    assert KnowledgeDomain.objects.get(domain_id="d").document_count == 0


def test_the_change_form_replaces_the_file_and_edits_planner_metadata(admin_client, vector_store):
    admin_client.post(ADD, {"file": upload("a.md", POOL), "new_domain": "infrastructure"})
    doc = ApiDocument.objects.get(doc_key="a.md")
    url = reverse("admin:knowledge_apidocument_change", args=[doc.pk])

    admin_client.post(
        url,
        {
            "replacement": upload("whatever.md", "# 数据库连接池配置\n\n只有一节。"),
            "covers": "连接池大小\n连接超时",
            "when_to_retrieve": "问连接池时",
        },
    )

    doc.refresh_from_db()
    assert doc.doc_key == "a.md" and doc.chunk_count == 1 and "只有一节" in doc.content
    assert vector_store.count(doc_key="a.md") == 1
    assert doc.metadata["covers"] == ["连接池大小", "连接超时"] and doc.metadata["covers_source"] == "manual"
    assert doc.metadata["when_to_retrieve_source"] == "manual"


def test_the_bulk_page_is_for_staff_only(client, django_user_model):
    assert client.get(BULK).status_code == 302  # to the login page
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(BULK).status_code == 403  # staff without the add permission


def test_the_documents_list_links_to_the_bulk_page(admin_client):
    page = admin_client.get(CHANGELIST).content.decode()
    assert BULK in page
    assert "per file" in admin_client.get(BULK).content.decode()
