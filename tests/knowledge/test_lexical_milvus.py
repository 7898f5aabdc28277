"""The lexical engine ``milvus`` (Milvus's own BM25 over the rows' text; milvus-lite has the
function too, so it runs here), and a collection for a Milvus without BM25 (dense and text only)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from knowledge.lexical import get_lexical_engine, lexical_search, query_tokens, reset_lexical_engine
from knowledge.services.documents import document_ingest
from knowledge.services.vectors import embedding_collection_check
from knowledge.vectorstore import SPARSE_FIELD, ChunkVector
from tests.knowledge.test_ingestion import markdown

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def milvus_engine(vector_store, settings):
    if not vector_store.capabilities().bm25_function:
        pytest.skip(f"Milvus's own BM25: {vector_store.capabilities().summary()}")
    settings.LEXICAL_ENGINE = "milvus"
    reset_lexical_engine()
    yield get_lexical_engine()
    reset_lexical_engine()


def test_the_milvus_engine_searches_the_rows_text_by_bm25_with_the_domain_filter(milvus_engine, capsys):
    document_ingest(data=markdown("支付失败排查手册", 2, words="支付超时时先查询订单状态。"), name="pay.md")
    document_ingest(data=markdown("网关手册", 1, domain="api", words="网关超时时重试。"), name="api.md")
    assert milvus_engine.name == "milvus" and not milvus_engine.separate

    hits = lexical_search(query_tokens("超时 订单"), top_k=10)
    assert hits[0].doc_key == "pay.md" and "订单" in hits[0].text
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True) and hits[-1].score > 0
    assert {h.doc_key for h in hits} == {"pay.md", "api.md"}
    assert {h.doc_key for h in lexical_search(query_tokens("超时"), top_k=10, domain="api")} == {"api.md"}
    assert lexical_search(query_tokens("超时"), top_k=10, domain=set()) == []
    only = milvus_engine.search(query_tokens("超时 订单"), top_k=10, doc_keys={"api.md"})
    assert {h.doc_key for h in only} == {"api.md"}
    assert milvus_engine.search(query_tokens("超时"), top_k=10, doc_keys=set()) == []
    assert milvus_engine.count() == milvus_engine.count(doc_key="pay.md") + 1

    call_command("check_index")
    assert "lexical index: milvus, in the vector rows (checked with them)" in capsys.readouterr().out


def test_a_store_without_bm25_gets_a_dense_collection_with_the_text_and_no_sparse_field(
    vector_store, monkeypatch
):
    monkeypatch.setattr(vector_store, "supports_bm25", lambda: False)
    vector_store.ensure_collection(dim=4, model_name="m")
    fields = {f["name"] for f in vector_store.client().describe_collection(vector_store.collection)["fields"]}
    assert "text" in fields and SPARSE_FIELD not in fields

    vector_store.upsert([ChunkVector("a#0", [1.0, 0.0, 0.0, 0.0], "payment", "a", 0, "正文")])
    assert [h.chunk_id for h in vector_store.search([1.0, 0.0, 0.0, 0.0], top_k=1)] == ["a#0"]
    vector_store.ensure_collection(dim=4, model_name="m")  # not refused for lacking BM25 fields
    monkeypatch.setattr("knowledge.services.vectors.embedding_signature", lambda: ("m", 4))
    embedding_collection_check()  # nor at start-up
