"""The one seam every chunk search sits behind: ``ChunkSearch.search(query, top_k, domains)``.

L1 asks one ``ChunkSearch`` for the best chunks of a query; which one depends on the mode
(``RETRIEVAL_L1_MODE``): the dense vector alone (``DenseSearch``) or Milvus's hybrid search,
dense and BM25 fused inside Milvus (``MilvusHybridSearch``). A new engine (an embedded lexical
index, a reranker in front of one) is one more class here, chosen in ``chunk_search_for``.

A hit is the vector store's ``VectorHit`` (``ChunkHit`` here): chunk id, doc key, domain, chunk
index, ``l2_distance`` (the raw squared L2 distance Milvus returns: lower is closer) and, from a
search that reads it, the chunk's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from knowledge.vectorstore import VectorHit, VectorStore

ChunkHit = VectorHit


@dataclass(frozen=True)
class SearchQuery:
    #: the query as the agent wrote it (cleaned)
    text: str
    #: its unit vector from the embedding model in force
    vector: list[float]
    #: the query's words for BM25 (empty: nothing for a lexical search to look for)
    lexical_text: str = ""


class ChunkSearch(Protocol):
    @property
    def mode(self) -> str:
        """What the call record names the search by: "dense", "hybrid:rrf", "hybrid:weighted"."""
        ...

    def search(
        self, query: SearchQuery, *, top_k: int, domains: str | frozenset[str] | None
    ) -> tuple[ChunkHit, ...]: ...


@dataclass(frozen=True)
class DenseSearch:
    store: VectorStore
    mode: str = "dense"

    def search(
        self, query: SearchQuery, *, top_k: int, domains: str | frozenset[str] | None
    ) -> tuple[ChunkHit, ...]:
        return tuple(self.store.search(query.vector, top_k=top_k, domain=domains))


@dataclass(frozen=True)
class MilvusHybridSearch:
    """Dense and BM25 in one Milvus ``hybrid_search``, fused by Milvus's ranker. A query with no
    word for BM25 (question words only) is searched dense alone."""

    store: VectorStore
    ranker: str
    rrf_k: int
    dense_weight: float

    @property
    def mode(self) -> str:
        return f"hybrid:{self.ranker}"

    def search(
        self, query: SearchQuery, *, top_k: int, domains: str | frozenset[str] | None
    ) -> tuple[ChunkHit, ...]:
        if not query.lexical_text:
            return DenseSearch(self.store).search(query, top_k=top_k, domains=domains)
        hits = self.store.hybrid_search(
            query.vector,
            query.lexical_text,
            top_k=top_k,
            domain=domains,
            ranker=self.ranker,
            rrf_k=self.rrf_k,
            dense_weight=self.dense_weight,
        )
        return tuple(hits)
