"""The lookup on documents that went through the real ingestion pipeline (issue 3): frontmatter
keywords and aliases reach L0, chunk vectors reach L1, a delete takes the document out at once."""

import pytest

from knowledge.models import ApiDocument
from knowledge.services.documents import document_delete, document_ingest
from retrieval.services import lookup_knowledge

pytestmark = pytest.mark.django_db(transaction=True)

GATEWAY = """---
title: 网关错误码说明
domain: api
keywords: [ERR_TIMEOUT, ERR_AUTH_FAILED]
aliases: [gateway error codes]
---
# 网关错误码说明

## 鉴权

ERR_AUTH_FAILED：令牌无效或过期，请重新获取令牌。

## 超时

ERR_TIMEOUT：请求超时错误码，上游服务没有在规定时间内响应，客户端应当重试。
"""

POOL = """---
title: MySQL 连接池配置说明
domain: infrastructure
keywords: [maximumPoolSize]
---
# MySQL 连接池配置说明

## 概述

如何配置数据库连接池：连接池大小、最小空闲连接数和连接超时时间。
"""


def test_ingested_documents_are_found_by_keyword_and_by_meaning_and_gone_after_delete(
    vector_store, session_id
):
    document_ingest(data=GATEWAY.encode(), name="api/gateway-errors.md")
    document_ingest(data=POOL.encode(), name="infrastructure/mysql-pool.md")
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {ApiDocument.Status.INDEXED}

    precise = lookup_knowledge(query="ｅｒｒ＿ｔｉｍｅｏｕｔ 是什么", session_id=session_id)
    assert precise.body["relevanceLevel"] == "PRECISE"
    assert precise.body["primary"]["docKey"] == "api/gateway-errors.md"
    assert precise.body["primary"]["headingPath"].endswith("超时")

    alias = lookup_knowledge(query="Gateway Error Codes", session_id=session_id + "-2")
    assert alias.body["primary"]["docKey"] == "api/gateway-errors.md"

    by_meaning = lookup_knowledge(query="数据库连接池怎么配置", session_id=session_id)
    assert by_meaning.body["found"] is True
    assert by_meaning.body["primary"]["docKey"] == "infrastructure/mysql-pool.md"
    assert by_meaning.details["l0_match_count"] == 0 and by_meaning.details["l1_top_similarity"] >= 0.5
    assert by_meaning.body["retrievedDomainsThisSession"] == ["api", "infrastructure"]

    document_delete(document=ApiDocument.objects.get(doc_key="api/gateway-errors.md"))
    gone = lookup_knowledge(query="ERR_TIMEOUT", session_id=session_id + "-3")
    assert gone.body["found"] is False
    assert gone.details["l0_match_count"] == 0
