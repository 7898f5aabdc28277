"""The share of the searchable chunks a lookup's filter keeps (``retrieval.lookup.scope_share``),
and the L1 search passing it to the vector store, so milvus-lite's graph index walks far enough
to meet a small scope's rows (``knowledge.milvus_index.filtered_search_params``)."""

from __future__ import annotations

import pytest

from knowledge.models import DocumentChunk
from knowledge.vectorstore import VectorStore
from retrieval.lookup.corpus import corpus_signature
from retrieval.lookup.scope_share import filter_share
from retrieval.lookup.vector_search import l1_caches_clear, l1_search
from tests.retrieval.conftest import seed_documents


def _chunks(**filters) -> int:
    return DocumentChunk.objects.filter(**filters).count()


@pytest.mark.django_db
def test_the_share_is_the_scope_s_chunks_over_every_searchable_chunk(corpus):
    seed_documents(corpus)
    signature = corpus_signature()
    total = _chunks()
    infrastructure = _chunks(document__domain="infrastructure")
    assert 0 < infrastructure < total
    assert filter_share(signature=signature, domains=None, doc_keys=None) is None
    assert (
        filter_share(signature=signature, domains="infrastructure", doc_keys=None) == infrastructure / total
    )
    both = frozenset({"infrastructure", "api"})
    assert filter_share(signature=signature, domains=both, doc_keys=None) == pytest.approx(
        _chunks(document__domain__in=both) / total
    )
    pool = frozenset({"infrastructure/mysql-pool.md"})
    assert filter_share(signature=signature, domains=None, doc_keys=pool) == pytest.approx(
        _chunks(document__doc_key__in=pool) / total
    )
    # the call's documents within the agent's domains: a document of another domain counts nothing
    assert filter_share(signature=signature, domains=frozenset({"api"}), doc_keys=pool) == 0.0
    assert filter_share(signature=signature, domains=None, doc_keys=frozenset()) == 0.0
    assert filter_share(signature=signature, domains="no-such-domain", doc_keys=None) == 0.0


@pytest.mark.django_db
def test_a_scoped_l1_search_tells_the_store_the_share_its_filter_keeps(corpus, monkeypatch):
    seed_documents(corpus)
    l1_caches_clear()
    asked = []
    real_search = VectorStore.search

    def spy(self, vector, **kwargs):
        asked.append((kwargs.get("domain"), kwargs.get("filter_share")))
        return real_search(self, vector, **kwargs)

    monkeypatch.setattr(VectorStore, "search", spy)
    signature = corpus_signature()
    scoped = l1_search(query="连接池", top_k=3, signature=signature, domain=frozenset({"infrastructure"}))
    assert scoped.hits and all(h.domain == "infrastructure" for h in scoped.hits)
    everything = l1_search(query="超时", top_k=3, signature=signature)
    assert everything.hits
    # Only an IVF index or milvus-lite's graph index needs the share: for a Milvus server's graph
    # index nothing is counted.
    expected = (
        _chunks(document__domain="infrastructure") / _chunks() if corpus.store.filter_share_matters else None
    )
    assert asked == [(frozenset({"infrastructure"}), pytest.approx(expected)), (None, None)]


@pytest.mark.django_db
def test_the_domain_counts_are_read_again_when_the_corpus_moved_at_most_every_interval(corpus, monkeypatch):
    from retrieval.lookup import scope_share

    seed_documents(corpus)
    scope_share.filter_share_cache_clear()
    reads = []
    real = scope_share.chunk_counts_by_domain

    def counted():
        reads.append(1)
        return real()

    monkeypatch.setattr(scope_share, "chunk_counts_by_domain", counted)
    first = filter_share(signature="s1", domains="infrastructure", doc_keys=None)
    assert filter_share(signature="s1", domains="infrastructure", doc_keys=None) == first
    assert (
        filter_share(signature="s2", domains="infrastructure", doc_keys=None) == first
    )  # within the interval
    assert len(reads) == 1
    monkeypatch.setattr(scope_share, "REREAD_SECONDS", 0.0)
    filter_share(signature="s3", domains="infrastructure", doc_keys=None)
    filter_share(signature="s3", domains="infrastructure", doc_keys=None)
    assert len(reads) == 2
