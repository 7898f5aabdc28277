"""What a staff user meets around an upload: the add form keeps a good file through a validation
error elsewhere (browsers cannot refill a file input, so the server holds it), a bulk upload ends
with "Go to the documents" showing exactly what was uploaded, and a domain's page lists its
documents. Through the Django test client; the browser side is in
tests/observability/test_browser_pages.py."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge.admin.held_uploads import upload_held, upload_hold
from knowledge.models import ApiDocument, KnowledgeDomain

pytestmark = pytest.mark.django_db(transaction=True)

ADD = reverse("admin:knowledge_apidocument_add")
BULK = reverse("admin:knowledge_apidocument_bulk_upload")
CHANGELIST = reverse("admin:knowledge_apidocument_changelist")
POOL = "# 数据库连接池配置\n\n最大连接数 20。"


def _upload(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode())


def _held_token(page: str) -> str:
    match = re.search(r'name="file-held" value="([0-9a-f]{32})"', page)
    assert match, "the form carries no held file"
    return match.group(1)


def test_a_good_file_is_kept_through_an_error_elsewhere_and_every_field_keeps_its_value(
    admin_client, vector_store
):
    KnowledgeDomain.objects.create(domain_id="payment")
    response = admin_client.post(
        ADD, {"file": _upload("pool.md", POOL), "new_domain": "not a domain!", "key": "infra/pool.md"}
    )
    assert response.status_code == 200 and ApiDocument.objects.count() == 0
    form = response.context["adminform"].form
    assert "new_domain" in form.errors and "file" not in form.errors
    page = response.content.decode()
    token = _held_token(page)
    assert "Kept from your last try: pool.md" in page
    assert 'value="not a domain!"' in page and 'value="infra/pool.md"' in page  # the other fields kept
    # The corrected form, its file input left empty: the held file is used, then dropped.
    done = admin_client.post(
        ADD, {"file-held": token, "new_domain": "infrastructure", "key": "infra/pool.md"}
    )
    assert done.status_code == 302
    document = ApiDocument.objects.get(doc_key="infra/pool.md")
    assert (document.domain, document.title) == ("infrastructure", "数据库连接池配置")
    user_id = response.wsgi_request.user.pk
    assert upload_held(owner=user_id, token=token) is None


def test_a_bad_file_is_not_kept_and_a_missing_or_foreign_held_file_asks_for_the_file(
    admin_client, vector_store, django_user_model
):
    bad = admin_client.post(ADD, {"file": SimpleUploadedFile("x.md", b"caf\xe9 \xff\xfe"), "new_domain": "d"})
    assert "file" in bad.context["adminform"].form.errors
    assert 'name="file-held"' not in bad.content.decode()
    nothing = admin_client.post(ADD, {"new_domain": "d"})
    assert nothing.context["adminform"].form.errors["file"] == ["This field is required."]
    # A token held for another staff user, or one that is gone, is refused with a clear message.
    other = django_user_model.objects.create_user("other-staff", is_staff=True)
    foreign = upload_hold(owner=other.pk, name="secret.md", data=b"# secret\n\nx")
    refused = admin_client.post(ADD, {"file-held": foreign, "new_domain": "d"})
    assert refused.context["adminform"].form.errors["file"] == [
        "The file chosen before is no longer kept: choose it again."
    ]
    assert ApiDocument.objects.count() == 0


def test_after_a_bulk_upload_go_to_the_documents_shows_exactly_what_was_uploaded(admin_client, vector_store):
    admin_client.post(ADD, {"file": _upload("older.md", "# Older\n\ntext"), "new_domain": "infrastructure"})
    response = admin_client.post(
        BULK,
        {
            "files": [
                _upload("a.md", "# A\n\ntext a"),
                _upload("b.md", "# B\n\ntext b"),
                _upload("c.rtf", "x"),
            ],
            "new_domain": "infrastructure",
        },
    )
    page = response.content.decode()
    uploaded = sorted(ApiDocument.objects.filter(doc_key__in=["a.md", "b.md"]).values_list("pk", flat=True))
    url = f"{CHANGELIST}?id__in={','.join(map(str, uploaded))}"
    assert response.context["uploaded_url"] == url
    assert 'id="go-to-documents"' in page and f'href="{url}"' in page
    assert "2 documents are in the knowledge base" in page
    listed = admin_client.get(url)
    assert [d.doc_key for d in listed.context["cl"].result_list] == ["a.md", "b.md"]  # not older.md
    assert "Showing the 2 documents of your upload." in listed.content.decode()
    failed_only = admin_client.post(BULK, {"files": [_upload("d.rtf", "x")], "new_domain": "x"})
    assert (
        failed_only.context["uploaded_url"] == ""
        and 'id="go-to-documents"' not in failed_only.content.decode()
    )


def test_a_domain_page_lists_its_documents_with_status_linked(admin_client, db):
    domain = KnowledgeDomain.objects.create(domain_id="infrastructure", description="基础设施 " + "长" * 240)
    ok = ApiDocument.objects.create(
        doc_key="infrastructure/pool.md",
        title="<b>连接池</b>",
        domain="infrastructure",
        content="x",
        status="INDEXED",
    )
    ApiDocument.objects.create(
        doc_key="infrastructure/bad.md", title="坏", domain="infrastructure", content="x", status="FAILED"
    )
    ApiDocument.objects.create(doc_key="payment/x.md", title="other", domain="payment", content="x")
    page = admin_client.get(
        reverse("admin:knowledge_knowledgedomain_change", args=[domain.pk])
    ).content.decode()
    table = page[page.index('id="domain-documents"') :]
    assert f'href="{reverse("admin:knowledge_apidocument_change", args=[ok.pk])}"' in table
    assert "&lt;b&gt;连接池&lt;/b&gt;" in table and "Indexed" in table and "Failed" in table
    assert "payment/x.md" not in table
    assert "?domain=infrastructure" in table
    assert "长" * 240 in page  # the whole description, in a text box that shows it
    assert "<textarea" in page[page.index('name="description"') - 200 : page.index('name="description"') + 10]
    empty = KnowledgeDomain.objects.create(domain_id="forgotten")
    assert (
        "No documents in this domain."
        in admin_client.get(
            reverse("admin:knowledge_knowledgedomain_change", args=[empty.pk])
        ).content.decode()
    )
