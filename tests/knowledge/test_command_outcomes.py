"""What an operator's script sees from the folder commands: `sync_documents` exits non-zero when
files failed (every one, or some), and `import_documents` never silently moves a same-named
document into another domain (it refuses, naming the file; --move moves it)."""

import io

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import ApiDocument

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_sync_exits_non_zero_when_every_file_failed(tmp_path, vector_store):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "empty.md").write_bytes(b"")
    (tmp_path / "ops" / "utf16.md").write_bytes("# 标题".encode("utf-16"))
    with pytest.raises(CommandError, match=r"2 files could not be synced \(every file\)"):
        run("sync_documents", str(tmp_path))
    assert ApiDocument.objects.count() == 0


def test_sync_exits_non_zero_when_some_failed_and_stores_the_others(tmp_path, vector_store):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "empty.md").write_bytes(b"")
    (tmp_path / "ops" / "deploy.md").write_text("# 部署\n\n先灰度。", encoding="utf-8")
    with pytest.raises(CommandError, match=r"^1 files could not be synced$"):
        run("sync_documents", str(tmp_path))
    assert list(ApiDocument.objects.values_list("doc_key", flat=True)) == ["ops/deploy.md"]


def test_a_clean_sync_exits_zero(tmp_path, vector_store):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "deploy.md").write_text("# 部署\n\n先灰度。", encoding="utf-8")
    out, _ = run("sync_documents", str(tmp_path))
    assert "1 added" in out


@pytest.fixture
def pool_in_infrastructure(tmp_path, vector_store):
    (tmp_path / "infrastructure").mkdir()
    (tmp_path / "infrastructure" / "pool.md").write_text("# 连接池\n\n最大连接数 20。", encoding="utf-8")
    run("import_documents", str(tmp_path / "infrastructure" / "pool.md"), "--domain", "infrastructure")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "pool.md").write_text("# 支付连接池\n\n支付库最大连接数 50。", encoding="utf-8")
    (notes / "refunds.md").write_text("# 退款\n\n三个工作日。", encoding="utf-8")
    return notes


def test_import_refuses_to_move_a_same_named_document_into_another_domain(pool_in_infrastructure):
    notes = pool_in_infrastructure
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 files would move an existing document into another domain"):
        call_command(
            "import_documents",
            str(notes / "pool.md"),
            str(notes / "refunds.md"),
            "--domain",
            "payment",
            stdout=io.StringIO(),
            stderr=err,
        )
    assert "pool.md: in domain 'infrastructure'; this import would move it to 'payment'" in err.getvalue()
    pool = ApiDocument.objects.get(doc_key="pool.md")
    assert (pool.domain, pool.title) == ("infrastructure", "连接池")
    assert not ApiDocument.objects.filter(doc_key="refunds.md").exists()  # nothing was imported


def test_import_with_move_moves_it(pool_in_infrastructure):
    notes = pool_in_infrastructure
    run("import_documents", str(notes / "pool.md"), "--domain", "payment", "--move")
    pool = ApiDocument.objects.get(doc_key="pool.md")
    assert (pool.domain, pool.title) == ("payment", "支付连接池")


def test_import_into_the_same_domain_replaces_without_asking(pool_in_infrastructure):
    notes = pool_in_infrastructure
    out, _ = run("import_documents", str(notes / "pool.md"), "--domain", "infrastructure")
    assert "1 updated" in out
    assert ApiDocument.objects.get(doc_key="pool.md").title == "支付连接池"
