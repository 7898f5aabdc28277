"""The lookup tests' corpus (``tests/retrieval/conftest.py``) writes what ingestion writes: the same
chunk rows, the same vector and the same BM25 text for the same chunk. Otherwise every similarity
band those tests pin would be tuned to vectors production never stores."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
from knowledge.services.documents import document_ingest

pytestmark = pytest.mark.django_db(transaction=True)

DOCUMENT = """---
title: 网关错误码说明
domain: api
keywords: [ERR_TIMEOUT]
---
# 网关错误码说明

## 鉴权

ERR_AUTH_FAILED：令牌无效或过期，请重新获取令牌。

## 超时

ERR_TIMEOUT：请求超时错误码，上游服务没有在规定时间内响应，客户端应当重试。
"""


def _stored(store, chunk_ids):
    # Strong: a Milvus server's default (Bounded) view may not hold rows written a moment ago.
    rows = store.client().get(
        store.collection,
        ids=chunk_ids,
        output_fields=["vector", "text", "domain"],
        consistency_level="Strong",
    )
    return {r["chunk_id"]: r for r in rows}


def test_the_fixture_stores_the_rows_vectors_and_text_ingestion_stores_for_the_same_chunks(corpus):
    document_ingest(data=DOCUMENT.encode(), name="api/ingested.md")
    ingested = ApiDocument.objects.get(doc_key="api/ingested.md")
    assert ingested.status == ApiDocument.Status.INDEXED
    chunks = list(DocumentChunk.objects.filter(document=ingested).order_by("chunk_index"))
    assert [c.heading_path for c in chunks] == ["网关错误码说明 > 鉴权", "网关错误码说明 > 超时"]

    # The same chunks written by the fixture: (heading, content) under the same title and domain.
    copy = corpus.add(
        "api/fixture.md",
        title=ingested.title,
        domain=ingested.domain,
        chunks=[(c.heading_path.split(" > ")[-1], c.content) for c in chunks],
    )
    copied = list(DocumentChunk.objects.filter(document=copy).order_by("chunk_index"))
    fields = ("chunk_index", "heading_path", "content", "pages")
    assert [[getattr(c, f) for f in fields] for c in copied] == [
        [getattr(c, f) for f in fields] for c in chunks
    ]

    ids = [chunk_id_for(doc, i) for doc in ("api/ingested.md", "api/fixture.md") for i in range(len(chunks))]
    stored = _stored(corpus.store, ids)
    assert sorted(stored) == sorted(ids)
    for i, chunk in enumerate(chunks):
        production = stored[chunk_id_for("api/ingested.md", i)]
        fixture = stored[chunk_id_for("api/fixture.md", i)]
        # Title, heading and content embedded (ingestion's chunk_embedding_text).
        heading = chunk.heading_path.split(" > ")[-1]
        assert fixture["text"] == production["text"] == f"网关错误码说明\n{heading}\n{chunk.content}"
        assert fixture["domain"] == production["domain"] == "api"
        np.testing.assert_allclose(fixture["vector"], production["vector"], atol=1e-6)
