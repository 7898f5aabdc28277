"""L0 matching rules the scenario tests leave open: word boundaries at the very end of a long
query and inside a term that contains the query, and the process's index being built once when
lookups arrive together."""

from __future__ import annotations

import threading
import time

from retrieval.lookup import keyword_index as keyword_index_module
from retrieval.lookup.keyword_index import (
    IndexedDocument,
    KeywordIndex,
    keyword_index_forget,
    keyword_index_get,
)


def _index(**terms: list[str]) -> KeywordIndex:
    return KeywordIndex((IndexedDocument(key, key, "d"), values) for key, values in terms.items())


def _keys(index: KeywordIndex, query: str) -> list[str]:
    return [m.doc_key for m in index.match(query)]


def test_a_keyword_ending_a_long_query_matches():
    # Over 256 characters: the end of the query is a position no small-int shortcut covers
    index = _index(**{"api/errors.md": ["ERR_TIMEOUT"]})
    query = "网关在高峰期间偶尔返回错误，" * 20 + " ERR_TIMEOUT"
    assert len(query) > 256
    assert _keys(index, query) == ["api/errors.md"]


def test_the_query_inside_a_term_must_not_cut_the_terms_word_in_two():
    index = _index(
        **{"infra/pool.md": ["connection poolside"], "infra/sizing.md": ["connection pool sizing"]}
    )
    # "pool" is a whole word of "connection pool sizing", but only the start of "poolside"
    assert _keys(index, "pool") == ["infra/sizing.md"]
    assert _keys(index, "connection pool") == ["infra/sizing.md"]
    # At the start of both terms, a whole word of each: both (the longer term first)
    assert _keys(index, "connection") == ["infra/sizing.md", "infra/pool.md"]


def test_lookups_arriving_together_at_a_new_process_build_the_index_once(monkeypatch):
    builds: list[int] = []

    def slow_build() -> KeywordIndex:
        builds.append(1)
        time.sleep(0.3)  # long enough for the second lookup to arrive and wait
        return _index(**{"a.md": ["ERR_TIMEOUT"]})

    monkeypatch.setattr(keyword_index_module, "keyword_index_build", slow_build)
    keyword_index_forget()
    results: list[KeywordIndex] = []
    threads = [
        threading.Thread(target=lambda: results.append(keyword_index_get(signature=("v1",))))
        for _ in range(2)
    ]
    try:
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        for thread in threads:
            thread.join(timeout=10)
        assert len(results) == 2 and results[0] is results[1]
        assert len(builds) == 1
        # A new corpus signature builds it again
        assert keyword_index_get(signature=("v2",)) is not results[0]
        assert len(builds) == 2
    finally:
        keyword_index_forget()


def test_a_keyword_must_not_start_inside_an_ascii_word_of_the_query():
    index = _index(**{"api/guide.md": ["api"]})
    assert _keys(index, "myapi 调用") == []
    assert _keys(index, "my api 调用") == ["api/guide.md"]


def test_a_term_a_document_repeats_is_reported_once():
    index = _index(**{"a.md": ["Redis"], "b.md": ["Redis", "redis"]})
    matches = {m.doc_key: m.terms for m in index.match("Redis 集群")}
    assert matches == {"a.md": ["redis"], "b.md": ["redis"]}


def test_the_query_starting_consecutive_terms_matches_each_of_them():
    index = _index(**{"a.md": ["pool sizing"], "b.md": ["pool settings"], "c.md": ["pooling"]})
    assert sorted(_keys(index, "pool")) == ["a.md", "b.md"]


def test_a_documents_matched_terms_come_longest_first():
    index = _index(**{"a.md": ["Redis", "Redis 缓存配置", "缓存"]})
    (match,) = index.match("Redis 缓存配置怎么改")
    assert match.terms == ["redis 缓存配置", "redis", "缓存"]


def test_the_query_is_looked_for_in_every_term_as_long_as_it_and_in_no_shorter_one():
    # The reverse direction scans only the terms at least as long as the query (longest first):
    # a term exactly as long as the query, the longest term and one between are all found.
    index = _index(
        **{
            "exact.md": ["redis"],
            "longest.md": ["a very long runbook title about redis clusters"],
            "middle.md": ["redis tuning"],
            "shorter.md": ["red"],
        }
    )
    assert sorted(_keys(index, "redis")) == ["exact.md", "longest.md", "middle.md"]
    # a query longer than every term: only terms inside it match
    assert sorted(_keys(index, "why does redis tuning not help the cluster")) == ["exact.md", "middle.md"]
