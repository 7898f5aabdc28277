"""L1: the query-vector and search-hit caches behind repeated queries."""

import pytest

from knowledge.embeddings import get_embedder
from retrieval.lookup.caches import LRUCache
from retrieval.services import lookup_knowledge

pytestmark = pytest.mark.django_db


@pytest.fixture
def encodes(monkeypatch):
    """Count the queries the embedder really encodes."""
    embedder = get_embedder()
    original = embedder.encode_query
    calls = []

    def counting(text):
        calls.append(text)
        return original(text)

    monkeypatch.setattr(embedder, "encode_query", counting)
    return calls


def test_a_repeated_query_is_neither_embedded_nor_searched_again(seeded_corpus, session_id, encodes):
    first = lookup_knowledge(query="数据库连接池配置", session_id=session_id, dry_run=True)
    again = lookup_knowledge(query="数据库连接池配置", session_id=session_id + "x", dry_run=True)
    assert encodes == ["数据库连接池配置"]
    assert (first.details["query_vector_cached"], first.details["l1_cached"]) == (False, False)
    assert (again.details["query_vector_cached"], again.details["l1_cached"]) == (True, True)
    assert again.details["l1_candidates"] == first.details["l1_candidates"]
    assert again.body == first.body


def test_a_corpus_change_drops_cached_hits_but_keeps_the_vector(seeded_corpus, session_id, encodes):
    lookup_knowledge(query="数据库连接池配置", session_id=session_id, dry_run=True)
    seeded_corpus.add(
        "infrastructure/pool-2.md", title="连接池新文档", domain="infrastructure", chunks=["数据库连接池配置"]
    )
    after = lookup_knowledge(query="数据库连接池配置", session_id=session_id, dry_run=True)
    assert after.details["l1_cached"] is False and after.details["query_vector_cached"] is True
    # The new document is among the searched candidates (whether it is also returned is the
    # level's call, and differs by lexical engine: Milvus's BM25 ranks the older document first).
    assert "infrastructure/pool-2.md" in {c["doc_key"] for c in after.details["l1_candidates"]}
    assert encodes == ["数据库连接池配置"]


def test_cache_size_zero_turns_the_caches_off(seeded_corpus, session_id, encodes, settings):
    settings.RETRIEVAL_QUERY_CACHE_SIZE = 0
    for _ in range(2):
        outcome = lookup_knowledge(query="ERR_TIMEOUT", session_id=session_id, dry_run=True)
        assert outcome.details["l1_cached"] is False
    assert encodes == ["ERR_TIMEOUT", "ERR_TIMEOUT"]


def test_the_lru_cache_evicts_the_least_recently_used():
    cache = LRUCache()
    cache.put("a", 1, capacity=2)
    cache.put("b", 2, capacity=2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3, capacity=2)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3


def test_a_flood_of_one_off_queries_cannot_evict_what_agents_ask_again():
    cache = LRUCache()
    for key in ("asked-twice-a", "asked-twice-b"):
        cache.put(key, key, capacity=100)
        assert cache.get(key) == key  # asked again: protected
    # One agent floods the cache with 10,000 questions it asks once each.
    for n in range(10_000):
        cache.put(f"flood-{n}", n, capacity=100)
    assert len(cache) == 100
    assert cache.get("asked-twice-a") == "asked-twice-a" and cache.get("asked-twice-b") == "asked-twice-b"
    assert cache.get("flood-0") is None and cache.get("flood-9999") == 9999


def test_the_protected_share_is_bounded_and_its_oldest_go_back_on_probation():
    cache = LRUCache()
    for n in range(10):
        cache.put(n, n, capacity=10)
        cache.get(n)
    assert len(cache._protected) == 8 and list(cache._probation) == [0, 1]
    cache.put("new", 1, capacity=10)  # evicts the probation's oldest, not a protected key
    assert cache.get(0) is None and cache.get(9) == 9 and cache.get("new") == 1
