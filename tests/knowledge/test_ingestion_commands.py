"""import_documents, reindex, export_documents and setup_demo's demo knowledge base, as an
operator runs them (embedded mode: indexing runs in-process)."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import ApiDocument, KnowledgeDomain

pytestmark = pytest.mark.django_db(transaction=True)

DEMO = Path(__file__).resolve().parents[2] / "knowledge" / "demo_corpus"


def run(*args, **options) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_import_documents_loads_a_folder_with_a_progress_bar_and_a_summary(vector_store):
    out, err = run("import_documents", str(DEMO))

    assert "12 files: 12 added, 0 updated, 0 unchanged, 0 failed" in out
    assert "importing: 100%" in err  # tqdm's bar
    assert set(ApiDocument.objects.values_list("domain", flat=True)) == {
        "infrastructure",
        "api-errors",
        "troubleshooting",
        "payment",
    }
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {ApiDocument.Status.INDEXED}
    assert vector_store.count() == sum(ApiDocument.objects.values_list("chunk_count", flat=True))
    assert KnowledgeDomain.objects.get(domain_id="payment").document_count == 3

    again, _ = run("import_documents", str(DEMO))
    assert "12 files: 0 added, 0 updated, 12 unchanged, 0 failed" in again


def test_import_reports_failures_with_reasons_and_exits_non_zero(tmp_path, vector_store):
    (tmp_path / "good.md").write_text("---\ndomain: ops\n---\n# Good\n\ntext")
    (tmp_path / "latin1.md").write_bytes("café ÿþ".encode("latin-1"))
    (tmp_path / "nodomain.md").write_text("# Lost\n\ntext")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    out = io.StringIO()

    with pytest.raises(CommandError, match="3 files could not be imported"):
        call_command("import_documents", str(tmp_path), stdout=out, stderr=io.StringIO())

    text = out.getvalue()
    assert "4 files: 1 added, 0 updated, 0 unchanged, 3 failed" in text
    assert "failed  latin1.md: file: is neither UTF-8 nor GB18030" in text
    assert "failed  nodomain.md: domain: the frontmatter names no domain" in text
    assert "failed  image.png: file: 'image.png' is not a supported format" in text
    assert list(ApiDocument.objects.values_list("doc_key", flat=True)) == ["good.md"]


def test_import_with_a_domain_and_wait(tmp_path, vector_store):
    (tmp_path / "a.md").write_text("# A\n\ntext a")
    (tmp_path / "b.txt").write_text("text b")

    out, _ = run("import_documents", str(tmp_path), domain="ops", wait=True)

    assert "2 files: 2 added" in out and "indexed 2, failed 0, still waiting 0" in out
    assert set(ApiDocument.objects.values_list("doc_key", "domain")) == {("a.md", "ops"), ("b.txt", "ops")}


def test_import_refuses_a_bad_domain_and_a_missing_path(tmp_path):
    with pytest.raises(CommandError, match="--domain: 'no spaces' may hold only"):
        run("import_documents", str(tmp_path), domain="no spaces")
    with pytest.raises(CommandError, match="does not exist"):
        run("import_documents", str(tmp_path / "missing"))


def test_reindex_requeues_a_domain(vector_store):
    run("import_documents", str(DEMO))
    ApiDocument.objects.filter(domain="payment").update(status=ApiDocument.Status.FAILED, error="x")

    out, _ = run("reindex", domain="payment", wait=True)

    assert "queued 3 documents" in out and "indexed 3, failed 0" in out
    assert not ApiDocument.objects.exclude(status=ApiDocument.Status.INDEXED).exists()
    with pytest.raises(CommandError, match="no documents in domain 'nowhere'"):
        run("reindex", domain="nowhere")


def test_reindex_recreate_is_the_fix_for_a_collection_of_another_model(vector_store):
    vector_store.ensure_collection(dim=8, model_name="old-model")
    run("import_documents", str(DEMO / "payment"), domain="payment")
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {ApiDocument.Status.FAILED}
    assert "reindex --recreate" in ApiDocument.objects.first().error

    out, _ = run("reindex", recreate=True, wait=True)

    assert "recreated the vector collection for 512-d 'use-multilingual-v3'" in out
    assert vector_store.describe_embedding() == ("use-multilingual-v3", 512)
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {ApiDocument.Status.INDEXED}
    assert vector_store.count() == sum(ApiDocument.objects.values_list("chunk_count", flat=True))


def test_reindex_recreate_cannot_be_limited_to_a_domain():
    with pytest.raises(CommandError, match="cannot be limited to one --domain"):
        run("reindex", recreate=True, domain="payment")


def test_export_writes_frontmatter_and_reimports_unchanged(tmp_path, vector_store):
    run("import_documents", str(DEMO))
    (tmp_path / "extra.md").write_text("# Derived title\n\nno frontmatter here")
    run("import_documents", str(tmp_path / "extra.md"), domain="misc")

    out, _ = run("export_documents", str(tmp_path / "export"))

    assert "wrote 13 documents" in out
    exported = (tmp_path / "export" / "payment" / "refund-guide.md").read_text()
    assert exported.startswith("---\ntitle: 退款处理指南\ndomain: payment\n")
    assert "covers:\n- 退款未到账" in exported  # written by hand in the source: exported
    extra = (tmp_path / "export" / "extra.md").read_text()
    assert "title: Derived title\ndomain: misc\n" in extra
    assert "when_to_retrieve" not in extra  # generated, not the file's: not exported

    again, _ = run("import_documents", str(tmp_path / "export"))
    assert "13 files: 0 added, 0 updated, 13 unchanged, 0 failed" in again


def test_setup_demo_loads_the_demo_knowledge_base_once(vector_store, settings, tmp_path, monkeypatch):
    settings.DEBUG = True  # setup_demo is for the embedded default only
    monkeypatch.setattr("retrieval.management.commands.setup_demo.VAR_DIR", tmp_path)

    out, _ = run("setup_demo")

    assert (
        "demo knowledge base loaded: 12 documents in api-errors, infrastructure, payment, troubleshooting"
        in out
    )
    assert json.loads((tmp_path / "demo-credentials.json").read_text())["demo_corpus_loaded"] is True
    titles = set(ApiDocument.objects.values_list("title", flat=True))
    assert {
        "支付失败排查手册",
        "ERR_TIMEOUT — upstream did not answer in time",
    } <= titles  # Chinese and English
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {ApiDocument.Status.INDEXED}

    ApiDocument.objects.filter(doc_key="payment/refund-guide.md").delete()
    out, _ = run("setup_demo")
    assert (
        "loaded before" in out and not ApiDocument.objects.filter(doc_key="payment/refund-guide.md").exists()
    )


def test_setup_demo_leaves_an_existing_knowledge_base_alone(vector_store, settings, tmp_path, monkeypatch):
    settings.DEBUG = True
    monkeypatch.setattr("retrieval.management.commands.setup_demo.VAR_DIR", tmp_path)
    ApiDocument.objects.create(
        doc_key="mine.md", title="Mine", domain="d", content="x", content_hash="0" * 64
    )
    out, _ = run("setup_demo")
    assert "demo knowledge base not loaded" in out and ApiDocument.objects.count() == 1
