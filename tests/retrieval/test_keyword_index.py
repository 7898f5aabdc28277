"""L0: the keyword index over INDEXED documents' keywords, aliases and titles."""

import os
import subprocess
import sys
import time

import pytest
from django.db import connection
from django.utils import timezone

from knowledge.models import ApiDocument
from retrieval.lookup.keyword_index import IndexedDocument, KeywordIndex, keyword_index_get, text_normalise
from tests.conftest import REPO, SERVICES_MODE


def _doc(doc_key, title, domain="d", **metadata):
    return ApiDocument.objects.create(
        doc_key=doc_key,
        title=title,
        domain=domain,
        content="x",
        content_hash="h",
        metadata=metadata,
        status=ApiDocument.Status.INDEXED,
        indexed_at=timezone.now(),
    )


def _keys(query):
    return [m.doc_key for m in keyword_index_get().match(query)]


@pytest.mark.django_db
def test_a_keyword_occurring_in_the_query_matches_its_document():
    _doc("api/errors.md", "网关错误码说明", keywords=["ERR_TIMEOUT", "ERR_AUTH_FAILED"])
    _doc("infra/pool.md", "连接池", keywords=["HikariCP"])
    assert _keys("接口返回 ERR_TIMEOUT 是什么意思") == ["api/errors.md"]
    assert _keys("HikariCP 参数") == ["infra/pool.md"]


@pytest.mark.django_db
def test_the_query_occurring_in_a_keyword_or_title_matches():
    _doc("infra/pool.md", "MySQL 数据库连接池配置", keywords=["connection pool sizing"])
    assert _keys("数据库连接池") == ["infra/pool.md"]
    assert _keys("pool sizing") == ["infra/pool.md"]


@pytest.mark.django_db
def test_aliases_match_like_keywords_and_metadata_strings_are_split():
    _doc("infra/cache.md", "缓存", aliases=["Memcached", "分布式缓存"])
    _doc("infra/mq.md", "消息队列", keywords="Kafka，RocketMQ; RabbitMQ")
    assert _keys("memcached 怎么用") == ["infra/cache.md"]
    assert _keys("RocketMQ 消费积压") == ["infra/mq.md"]


@pytest.mark.django_db
def test_traditional_and_simplified_keywords_and_queries_match_each_other():
    _doc("zh/library.md", "圖書館開放時間")
    _doc("zh/metro.md", "地铁换乘指南", keywords=["轨道交通"])
    assert _keys("图书馆开放时间是几点") == ["zh/library.md"]
    assert _keys("軌道交通怎麼換乘") == ["zh/metro.md"]
    # what is stored and shown stays as written
    assert keyword_index_get().match("图书馆开放时间")[0].title == "圖書館開放時間"


@pytest.mark.django_db
def test_matching_ignores_case_and_full_half_width():
    _doc("api/errors.md", "网关错误码说明", keywords=["ERR_TIMEOUT"])
    assert _keys("err_timeout") == ["api/errors.md"]
    assert _keys("ＥＲＲ＿ＴＩＭＥＯＵＴ") == ["api/errors.md"]
    assert text_normalise("  ＨｉｋａｒｉＣＰ\u3000 参数 ") == "hikaricp 参数"


@pytest.mark.django_db
def test_keywords_under_two_characters_are_ignored():
    _doc("a.md", "标题甲", keywords=["K", "池"])
    assert _keys("K 池 是什么") == []
    assert _keys("池") == []


@pytest.mark.django_db
def test_a_match_does_not_cut_an_ascii_word_in_two():
    _doc("a.md", "标题甲", keywords=["api"])
    _doc("b.md", "标题乙", keywords=["连接"])
    assert _keys("rapid deployment") == []
    assert _keys("how to call the API?") == ["a.md"]
    assert _keys("api调用") == ["a.md"]
    # CJK has no word boundaries: anywhere counts.
    assert _keys("数据库连接池") == ["b.md"]


@pytest.mark.django_db
def test_match_count_is_the_number_of_distinct_documents():
    _doc("a.md", "Redis 缓存配置指南", keywords=["Redis", "缓存"])
    _doc("b.md", "Redis 集群", keywords=["Redis"])
    _doc("c.md", "其他", keywords=["Kafka"])
    matches = keyword_index_get().match("Redis 缓存 怎么配")
    assert sorted(m.doc_key for m in matches) == ["a.md", "b.md"]
    # The document with the longest matched term ranks first.
    assert matches[0].doc_key == "a.md"


@pytest.mark.django_db
def test_only_documents_with_an_indexed_version_are_indexed():
    _doc("a.md", "标题", keywords=["ERR_TIMEOUT"])
    never_indexed = _doc("b.md", "标题二", keywords=["ERR_TIMEOUT"])
    never_indexed.status, never_indexed.indexed_at = ApiDocument.Status.INDEXING, None
    never_indexed.save()
    reindexing = _doc("c.md", "标题三", keywords=["ERR_TIMEOUT"])
    reindexing.status = ApiDocument.Status.INDEXING  # its previous version is still indexed
    reindexing.save()
    assert _keys("ERR_TIMEOUT") == ["a.md", "c.md"]


@pytest.mark.django_db
def test_the_index_follows_uploads_edits_and_deletes_without_a_restart():
    assert _keys("ERR_TIMEOUT") == []
    doc = _doc("a.md", "错误码", keywords=["ERR_TIMEOUT"])
    assert _keys("ERR_TIMEOUT") == ["a.md"]
    doc.metadata = {"keywords": ["ERR_GATEWAY"]}
    doc.save()
    assert _keys("ERR_TIMEOUT") == []
    assert _keys("ERR_GATEWAY") == ["a.md"]
    doc.delete()
    assert _keys("ERR_GATEWAY") == []


@pytest.mark.django_db
def test_the_index_is_rebuilt_only_when_the_corpus_changed():
    _doc("a.md", "错误码", keywords=["ERR_TIMEOUT"])
    first = keyword_index_get()
    assert keyword_index_get() is first
    _doc("b.md", "错误码二", keywords=["ERR_GATEWAY"])
    assert keyword_index_get() is not first


def test_the_matcher_handles_100000_keywords():
    documents = [
        (IndexedDocument(f"doc{i}.md", f"文档 {i}", "d"), [f"KEY_{i:06d}", f"关键词{i:06d}说明"])
        for i in range(50_000)
    ]
    index = KeywordIndex(documents)
    assert index.term_count == 100_000
    matches = index.match("请解释 KEY_004242 和 关键词049999说明 的含义")
    assert sorted(m.doc_key for m in matches) == ["doc4242.md", "doc49999.md"]
    # The query inside a term, over all 100,000 terms.
    assert [m.doc_key for m in index.match("049999说明")] == ["doc49999.md"]
    assert index.match("KEY_00424") == []  # would cut KEY_004240.. in two
    assert len(index.match("说明")) == 50_000


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_document_indexed_by_another_process_is_matched_without_a_restart():
    """Another process (as the Celery worker would) marks a document INDEXED and deletes it;
    this process's index follows both through the database."""
    _doc("a.md", "错误码", keywords=["ERR_TIMEOUT"])
    assert _keys("ERR_WORKER") == []
    db_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": db_url}

    def other_process(code: str) -> None:
        prelude = (
            "import django; django.setup(); from django.utils import timezone;"
            " from knowledge.models import ApiDocument as D;"
        )
        out = subprocess.run(
            [sys.executable, "-c", prelude + code],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr

    other_process(
        "D.objects.create(doc_key='w.md', title='worker doc', domain='d', content='x', content_hash='h',"
        " metadata={'keywords': ['ERR_WORKER']}, status='INDEXED',"
        " indexed_at=timezone.now())"
    )
    assert _keys("ERR_WORKER") == ["w.md"]
    other_process("D.objects.filter(doc_key='w.md').delete()")
    assert _keys("ERR_WORKER") == []
    assert SERVICES_MODE


@pytest.mark.django_db(transaction=True)
def test_with_a_refresh_interval_changes_show_up_without_a_restart(settings):
    """With RETRIEVAL_INDEX_REFRESH_MS set, the process's watcher thread re-reads the corpus
    signature in the background (a lookup reads it itself only when the watcher is late), and
    the lookup after a change sees it."""
    from retrieval.lookup.corpus import corpus_signature, corpus_signature_forget

    settings.RETRIEVAL_INDEX_REFRESH_MS = 50
    corpus_signature_forget()
    try:
        before = corpus_signature()
        _doc("late.md", "后来的文档", keywords=["ERR_LATE"])
        deadline = time.monotonic() + 10
        while corpus_signature() == before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert corpus_signature() != before
        assert _keys("ERR_LATE") == ["late.md"]
        # An edit in place (same documents, new keywords) shows within ten intervals.
        document = ApiDocument.objects.get(doc_key="late.md")
        document.metadata = {"keywords": ["ERR_EDITED"]}
        document.save()
        deadline = time.monotonic() + 10
        while _keys("ERR_EDITED") != ["late.md"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _keys("ERR_EDITED") == ["late.md"] and _keys("ERR_LATE") == []
    finally:
        settings.RETRIEVAL_INDEX_REFRESH_MS = 0  # the watcher thread stops at its next wake-up
        time.sleep(0.1)
