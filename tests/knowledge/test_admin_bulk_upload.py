"""The bulk upload page when some picked files are bad: the good ones are stored, each refused one
is its own row with its reason, and picked files are kept through an error that is not theirs.
Through the Django test client, as staff use it; vectors counted in Milvus."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge.admin.held_uploads import upload_held, upload_hold
from knowledge.models import ApiDocument

pytestmark = pytest.mark.django_db(transaction=True)

BULK = reverse("admin:knowledge_apidocument_bulk_upload")


def _upload(name: str, data: str | bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data.encode() if isinstance(data, str) else data)


def _rows(response) -> dict[str, dict]:
    return {row["name"]: row for row in response.context["results"]}


def _held_tokens(page: str) -> list[str]:
    return re.findall(r'name="files-held" value="([0-9a-f]{32})"', page)


def test_an_empty_file_among_good_ones_is_refused_alone_and_named(admin_client, vector_store):
    response = admin_client.post(
        BULK,
        {
            "files": [
                _upload("a.md", "# A\n\ntext a"),
                _upload("empty.md", b""),
                _upload("b.md", "# B\n\nb"),
            ],
            "new_domain": "ops",
        },
    )
    assert response.status_code == 200
    assert not response.context["form"].errors
    rows = _rows(response)
    assert rows["empty.md"]["outcome"] == "failed" and rows["empty.md"]["error"] == "file: is empty"
    assert rows["a.md"]["outcome"] == rows["b.md"]["outcome"] == "added"
    assert response.context["counts"] == {"added": 2, "updated": 0, "unchanged": 0, "failed": 1}
    assert set(ApiDocument.objects.values_list("doc_key", flat=True)) == {"a.md", "b.md"}
    assert vector_store.count() == 2
    page = response.content.decode()
    assert "empty.md" in page and "file: is empty" in page


def test_a_picked_file_over_the_size_limit_is_refused_alone(admin_client, vector_store, settings):
    settings.INGEST_MAX_FILE_BYTES = 100
    response = admin_client.post(
        BULK, {"files": [_upload("big.md", "x" * 500), _upload("a.md", "# A\n\nsmall")], "new_domain": "ops"}
    )
    rows = _rows(response)
    assert rows["big.md"]["outcome"] == "failed"
    assert "larger than the limit of 100 bytes (INGEST_MAX_FILE_BYTES)" in rows["big.md"]["error"]
    assert rows["a.md"]["outcome"] == "added"
    assert list(ApiDocument.objects.values_list("doc_key", flat=True)) == ["a.md"]


def test_only_bad_files_still_answer_with_their_rows(admin_client, vector_store):
    response = admin_client.post(BULK, {"files": [_upload("empty.md", b"")], "new_domain": "ops"})
    assert _rows(response)["empty.md"]["error"] == "file: is empty"
    assert ApiDocument.objects.count() == 0


def test_picked_files_are_kept_through_a_domain_error_and_uploaded_on_the_next_submit(
    admin_client, vector_store, admin_user
):
    response = admin_client.post(
        BULK,
        {
            "files": [_upload("a.md", "# A\n\ntext a"), _upload("b.md", "# B\n\nb")],
            "new_domain": "not a domain!",
        },
    )
    form = response.context["form"]
    assert "new_domain" in form.errors and "files" not in form.errors
    assert ApiDocument.objects.count() == 0
    page = response.content.decode()
    assert "Kept from your last try: a.md, b.md" in page
    tokens = _held_tokens(page)
    assert len(tokens) == 2

    # The corrected form, the file input left empty: the kept files are uploaded, then dropped.
    response = admin_client.post(BULK, {"files-held": tokens, "new_domain": "ops"})
    assert response.context["counts"]["added"] == 2
    assert set(ApiDocument.objects.values_list("domain", flat=True)) == {"ops"}
    assert all(upload_held(owner=admin_user.pk, token=t) is None for t in tokens)


def test_a_refused_upload_keeps_no_files(admin_client, vector_store, settings):
    settings.INGEST_MAX_FILES_PER_UPLOAD = 1
    response = admin_client.post(
        BULK, {"files": [_upload("a.md", "# A\n\na"), _upload("b.md", "# B\n\nb")], "new_domain": "ops"}
    )
    assert "INGEST_MAX_FILES_PER_UPLOAD" in " ".join(response.context["form"].errors["files"])
    assert not _held_tokens(response.content.decode())


def test_another_users_held_file_is_not_used(admin_client, vector_store, django_user_model):
    other = django_user_model.objects.create_user("other", password="x", is_staff=True)
    token = upload_hold(owner=other.pk, name="a.md", data=b"# A\n\na")
    response = admin_client.post(BULK, {"files-held": [token], "new_domain": "ops"})
    assert "no longer kept" in " ".join(response.context["form"].errors["files"])
    assert ApiDocument.objects.count() == 0


def test_nothing_picked_and_nothing_kept_asks_for_files(admin_client, vector_store):
    response = admin_client.post(BULK, {"new_domain": "ops"})
    assert response.context["form"].errors["files"] == ["This field is required."]
