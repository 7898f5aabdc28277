"""`sync_documents DIR`: the knowledge base mirrors a folder. Added, changed, unchanged (skipped
by hash, nothing written), gone (deleted only with --prune, dry-run writes nothing), and a
re-run changes nothing. Vectors are counted in Milvus."""

import pytest
from django.core.management import call_command

from knowledge.models import ApiDocument
from knowledge.services.documents import document_ingest
from knowledge.tasks.maintenance import sync_sources
from tests.support import documents as files

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "docs"
    (root / "payment").mkdir(parents=True)
    (root / "ops").mkdir()
    (root / "payment" / "refunds.md").write_text("# 退款指南\n\n退款三个工作日内到账。", encoding="utf-8")
    (root / "payment" / "handbook.pdf").write_bytes(files.pdf_bytes(pages=2))
    (root / "ops" / "deploy.docx").write_bytes(files.docx_bytes())
    (root / "ops" / "scan.pdf").write_bytes(files.scanned_pdf_bytes())
    return root


def _sync(folder, *args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("sync_documents", str(folder), *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def _state() -> dict:
    return {d.doc_key: (d.status, d.content_hash, d.updated_at) for d in ApiDocument.objects.all()}


def test_a_folder_is_mirrored_and_a_second_run_changes_nothing(folder, vector_store):
    out = _sync(folder)
    assert "4 added, 0 updated, 0 unchanged, 0 failed, 0 deleted" in out
    statuses = dict(ApiDocument.objects.values_list("doc_key", "status"))
    assert statuses == {
        "payment/refunds.md": "INDEXED",
        "payment/handbook.pdf": "INDEXED",
        "ops/deploy.docx": "INDEXED",
        "ops/scan.pdf": "FAILED",  # its reason on the row; a re-run does not retry it
    }
    assert ApiDocument.objects.get(doc_key="ops/deploy.docx").domain == "ops"
    before, vectors = _state(), vector_store.count()

    again = _sync(folder)

    assert "0 added, 0 updated, 4 unchanged, 0 failed, 0 deleted" in again
    assert _state() == before and vector_store.count() == vectors


def test_changed_files_are_reindexed_and_gone_ones_deleted_only_with_prune(folder, vector_store):
    _sync(folder)
    document_ingest(data="# 手工上传\n\n不在文件夹里。".encode(), name="manual.md", domain="ops")
    (folder / "payment" / "refunds.md").write_text("# 退款指南\n\n退款五个工作日内到账。", encoding="utf-8")
    (folder / "ops" / "deploy.docx").unlink()

    out = _sync(folder)
    assert "0 added, 1 updated, 2 unchanged, 0 failed, 0 deleted" in out
    assert "五个工作日" in ApiDocument.objects.get(doc_key="payment/refunds.md").content
    assert ApiDocument.objects.filter(doc_key="ops/deploy.docx").exists()

    dry = _sync(folder, "--prune", "--dry-run")
    assert "1 would be deleted" in dry and "would delete  ops/deploy.docx" in dry
    assert ApiDocument.objects.filter(doc_key="ops/deploy.docx").exists()

    pruned = _sync(folder, "--prune")
    assert "0 added, 0 updated, 3 unchanged, 0 failed, 1 deleted" in pruned
    assert not ApiDocument.objects.filter(doc_key="ops/deploy.docx").exists()
    assert vector_store.count(doc_key="ops/deploy.docx") == 0
    # a document uploaded otherwise is never pruned
    assert ApiDocument.objects.filter(doc_key="manual.md").exists()


def test_a_dry_run_writes_nothing(folder, vector_store):
    out = _sync(folder, "--dry-run")
    assert "4 would be added" in out
    assert ApiDocument.objects.count() == 0 and vector_store.count() == 0


def test_beat_mirrors_the_configured_sources_into_their_domain(folder, vector_store, settings):
    settings.SYNC_SOURCES = {str(folder / "payment"): "finance"}
    settings.SYNC_PRUNE = False

    summaries = sync_sources()

    assert summaries == [
        f"{(folder / 'payment').resolve()}: 2 added, 0 updated, 0 unchanged, 0 failed, 0 deleted"
    ]
    assert dict(ApiDocument.objects.values_list("doc_key", "domain")) == {
        "refunds.md": "finance",
        "handbook.pdf": "finance",
    }
    assert sync_sources() == [
        f"{(folder / 'payment').resolve()}: 0 added, 0 updated, 2 unchanged, 0 failed, 0 deleted"
    ]
