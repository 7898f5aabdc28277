"""The lexical index under upkeep: ``check_index`` compares it with the database (chunk ids per
document) and ``--repair`` puts it right from the chunk rows; an index built by another analyser
needs a rebuild, which ``reindex --lexical-only`` does from the stored text without embedding."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.management import CommandError, call_command

from knowledge.embeddings import get_embedder
from knowledge.lexical import LexicalChunk, analyse, get_lexical_engine, lexical_search, query_tokens
from knowledge.lexical import analyser as analyser_module
from knowledge.models import ApiDocument, DocumentChunk
from knowledge.services.documents import document_ingest
from knowledge.services.maintenance import index_check
from tests.knowledge.test_ingestion import markdown

pytestmark = pytest.mark.django_db(transaction=True)


def all_chunk_ids() -> set[str]:
    return {c.chunk_id for c in DocumentChunk.objects.select_related("document")}


def entry(doc_key: str, index: int, domain: str, text: str = "多余的条目") -> LexicalChunk:
    return LexicalChunk(f"{doc_key}#{index}", doc_key, domain, index, tuple(analyse(text)), text)


def texts_by_chunk(query: str) -> dict[str, str]:
    return {h.chunk_id: h.text for h in lexical_search(query_tokens(query), top_k=100)}


def test_check_index_finds_lexical_drift_and_repair_rewrites_it_from_the_rows(vector_store, capsys):
    # Given a lexical index that drifted from the database in every way it can
    document_ingest(data=markdown("Handbook", 3), name="payment/handbook.md")
    document_ingest(data=markdown("Refunds", 2), name="payment/refunds.md")
    document_ingest(data=markdown("Gateway", 2, domain="api"), name="api/gateway.md")
    engine = get_lexical_engine()
    gateway = [e for e in engine.entries() if e.doc_key == "api/gateway.md"]
    with engine.writing() as write:
        write.delete_chunks(["payment/handbook.md#1"])  # missing
        write.add([entry("deleted/old.md", 0, "payment")])  # orphaned
        write.add([entry("payment/refunds.md", 7, "payment")])  # stale
        write.replace(
            "api/gateway.md", [entry(e.doc_key, int(e.chunk_id.rsplit("#")[1]), "payment") for e in gateway]
        )

    # When check_index runs without --repair
    with pytest.raises(CommandError, match="--repair"):
        call_command("check_index", "--json")
    report = json.loads(capsys.readouterr().out)

    # Then each drift is named, the vectors are fine, and nothing is changed
    assert (report["missing"], report["orphaned"], report["stale"], report["wrong_domain"]) == (
        [],
        [],
        [],
        [],
    )
    lexical = report["lexical"]
    assert lexical["engine"] == "tantivy" and lexical["ok"] is False
    assert lexical["missing"] == ["payment/handbook.md#1"]
    assert lexical["orphaned"] == ["deleted/old.md#0"]
    assert lexical["stale"] == ["payment/refunds.md#7"]
    assert lexical["wrong_domain"] == ["api/gateway.md#0", "api/gateway.md#1"]
    assert lexical["drifted_documents"] == [
        "api/gateway.md",
        "deleted/old.md",
        "payment/handbook.md",
        "payment/refunds.md",
    ]
    assert "deleted/old.md#0" in engine.chunk_ids()

    # When it runs with --repair
    call_command("check_index", "--repair")
    out = capsys.readouterr().out
    assert "lexical: rewrote the entries of 4 documents from their rows" in out
    assert "queued re-indexing of 0 documents" in out  # nothing to embed again

    # Then the lexical index holds exactly the database's chunks, each in its document's domain
    assert engine.chunk_ids() == all_chunk_ids() == vector_store.chunk_ids()
    assert {e.domain for e in engine.entries() if e.doc_key == "api/gateway.md"} == {"api"}
    assert index_check().ok


def test_a_consistent_index_says_so_for_the_lexical_side_too(vector_store, capsys):
    document_ingest(data=markdown("支付失败排查手册", 2), name="payment/handbook.md")
    call_command("check_index")
    out = capsys.readouterr().out
    chunks = DocumentChunk.objects.count()
    assert f"lexical index: tantivy, {chunks} entries" in out and "index consistent" in out


def test_an_index_built_by_another_analyser_needs_a_rebuild_which_reindex_lexical_only_does(
    vector_store, capsys, monkeypatch
):
    document_ingest(data=markdown("Handbook", 3), name="payment/handbook.md")
    indexed_text = texts_by_chunk("handbook")
    assert indexed_text

    # The analyser changes (here: its script folding), so tokens indexed before may differ
    monkeypatch.setattr(analyser_module, "SCRIPT_FOLD", "t2s")
    analyser_module.analyser_signature.cache_clear()
    try:
        with pytest.raises(CommandError):
            call_command("check_index")
        out = capsys.readouterr().out
        assert "lexical: needs a rebuild (`reindex --lexical-only`)" in out and "fold/t2s" in out

        call_command("reindex", "--lexical-only")
        assert "rebuilt the lexical index: 1 documents" in capsys.readouterr().out
        assert index_check().ok
        assert texts_by_chunk("handbook") == indexed_text
    finally:
        analyser_module.analyser_signature.cache_clear()


def test_reindex_lexical_only_rebuilds_a_lost_index_from_the_stored_text_without_embedding(
    vector_store, capsys, monkeypatch
):
    document_ingest(data=markdown("支付失败排查手册", 3), name="payment/handbook.md")
    document_ingest(
        data=markdown("Gateway", 2, domain="api", words="网关返回 ERR_QUOTA 时重试。"), name="api/gw.md"
    )
    engine = get_lexical_engine()
    before = {q: texts_by_chunk(q) for q in ("排查手册", "err_quota", "section")}
    scores = [h.score for h in lexical_search(query_tokens("支付 超时 网关"), top_k=10)]
    shutil.rmtree(engine.path)
    engine.close()
    assert not index_check().ok  # every chunk is missing from the lexical index

    def no_model(texts):
        raise AssertionError("a lexical rebuild must not embed")

    monkeypatch.setattr(get_embedder(), "_encode", no_model)
    call_command("reindex", "--lexical-only")
    assert "2 documents" in capsys.readouterr().out

    assert engine.chunk_ids() == all_chunk_ids()
    assert {q: texts_by_chunk(q) for q in before} == before  # the same text as indexing wrote
    assert [h.score for h in lexical_search(query_tokens("支付 超时 网关"), top_k=10)] == pytest.approx(
        scores
    )
    assert {h.doc_key for h in lexical_search(query_tokens("网关 手册"), top_k=10, domain="api")} == {
        "api/gw.md"
    }
    assert index_check().ok


def test_a_rebuild_leaves_a_document_being_indexed_to_its_run(vector_store):
    document_ingest(data=markdown("A", 2), name="a.md")
    document_ingest(data=markdown("B", 2), name="b.md")
    engine = get_lexical_engine()
    # b.md is being indexed: a run has written its new entries and not swapped its rows yet
    ApiDocument.objects.filter(doc_key="b.md").update(status=ApiDocument.Status.INDEXING)
    engine.documents_replace({"b.md": [entry("b.md", 0, "payment", "新版本正在索引")]})
    engine.documents_replace({"a.md": []})  # and a.md's entries were lost

    call_command("reindex", "--lexical-only")

    assert engine.chunk_ids(doc_key="a.md") == {
        c.chunk_id for c in DocumentChunk.objects.filter(document__doc_key="a.md")
    }
    assert engine.chunk_ids(doc_key="b.md") == {"b.md#0"}
    assert [h.doc_key for h in lexical_search(query_tokens("正在索引"), top_k=5)] == ["b.md"]


def test_reindex_lexical_only_refuses_what_it_does_not_do(vector_store):
    with pytest.raises(CommandError, match="no --domain or --recreate"):
        call_command("reindex", "--lexical-only", "--recreate")
    with pytest.raises(CommandError, match="goes with --lexical-only"):
        call_command("reindex", "--from-scratch")
