"""The one seam every chunk search sits behind: ``ChunkSearch.search(query, top_k, domains,
doc_keys, filter_share)`` (``doc_keys``: only these documents, a call's metadata condition; None:
every one; ``filter_share``: the share of the chunks they hold, ``retrieval.lookup.scope_share``).

L1 asks one ``ChunkSearch`` for the best chunks of a query; which one depends on the mode
(``RETRIEVAL_L1_MODE``): the dense vector alone (``DenseSearch``) or hybrid search
(``FusedSearch``): dense in Milvus and BM25 in the lexical engine in force, fused here. A new
engine (a reranker in front of one) is one more class here, chosen in
``retrieval.lookup.vector_search.chunk_search_for``.

A hit is the vector store's ``VectorHit`` (``ChunkHit`` here): chunk id, doc key, domain, chunk
index, ``l2_distance`` (the raw squared L2 distance Milvus returns: lower is closer) and, from a
search that reads it, the chunk's text.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from knowledge.lexical import LexicalEngine, LexicalHit
from knowledge.vectorstore import VectorHit, VectorStore
from retrieval.lookup.fusion import Ranked, rankings_fuse

logger = logging.getLogger(__name__)
# Runs BM25 and fetches its hits' stored vectors while the query is embedded (FusedSearch.search).
_background = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agentkb-l1")

ChunkHit = VectorHit


@dataclass(frozen=True)
class SearchQuery:
    #: the query as the agent wrote it (cleaned)
    text: str
    #: its unit vector from the embedding model in force, computed when a search first asks (so
    #: a search can do what needs no vector meanwhile)
    embed: Callable[[], list[float]]
    #: the query's key terms as the one analyser cuts them (``knowledge.lexical.query_tokens``);
    #: empty: nothing for a lexical search to look for
    lexical_tokens: tuple[str, ...] = ()


class ChunkSearch(Protocol):
    @property
    def mode(self) -> str:
        """What the call record names the search by: "dense", "hybrid:rrf", "hybrid:weighted"."""
        ...

    def search(
        self,
        query: SearchQuery,
        *,
        top_k: int,
        domains: str | frozenset[str] | None,
        doc_keys: frozenset[str] | None = None,
        filter_share: float | None = None,
    ) -> tuple[ChunkHit, ...]: ...


@dataclass(frozen=True)
class DenseSearch:
    store: VectorStore
    mode: str = "dense"

    def search(
        self,
        query: SearchQuery,
        *,
        top_k: int,
        domains: str | frozenset[str] | None,
        doc_keys: frozenset[str] | None = None,
        filter_share: float | None = None,
    ) -> tuple[ChunkHit, ...]:
        return tuple(
            self.store.search(
                query.embed(), top_k=top_k, domain=domains, doc_keys=doc_keys, filter_share=filter_share
            )
        )


@dataclass(frozen=True)
class FusedSearch:
    """Hybrid L1: the dense search in Milvus and BM25 in the lexical engine in force (tantivy
    beside Milvus, or Milvus's own BM25: ``knowledge.lexical``), fused here
    (``retrieval.lookup.fusion``), whatever the engine. A chunk only BM25 found gets its squared L2
    distance from its stored vector, so every hit carries the same evidence. A query with no word
    for BM25 (question words only) is searched dense alone."""

    store: VectorStore
    lexical: LexicalEngine
    ranker: str
    rrf_k: int
    dense_weight: float

    @property
    def mode(self) -> str:
        return f"hybrid:{self.ranker}"

    def search(
        self,
        query: SearchQuery,
        *,
        top_k: int,
        domains: str | frozenset[str] | None,
        doc_keys: frozenset[str] | None = None,
        filter_share: float | None = None,
    ) -> tuple[ChunkHit, ...]:
        if not query.lexical_tokens:
            return tuple(
                self.store.search(
                    query.embed(),
                    top_k=top_k,
                    domain=domains,
                    with_text=True,
                    doc_keys=doc_keys,
                    filter_share=filter_share,
                )
            )
        # BM25, and the stored vectors of its hits, while the query is embedded: neither needs the
        # vector, so a chunk only BM25 finds costs no round trip after the dense search.
        lexical_job = _background.submit(
            self._lexical_with_vectors, query.lexical_tokens, top_k, domains, doc_keys
        )
        vector = query.embed()
        dense = self.store.search(
            vector, top_k=top_k, domain=domains, with_text=True, doc_keys=doc_keys, filter_share=filter_share
        )
        lexical, stored = lexical_job.result()
        order = rankings_fuse(
            [Ranked(h.chunk_id, h.l2_distance) for h in dense],
            [Ranked(h.chunk_id, h.score) for h in lexical],
            ranker=self.ranker,
            top_k=top_k,
            rrf_k=self.rrf_k,
            dense_weight=self.dense_weight,
        )
        return self._hits(order, dense, lexical, stored, vector)

    def _lexical_with_vectors(
        self,
        tokens: tuple[str, ...],
        top_k: int,
        domains: str | frozenset[str] | None,
        doc_keys: frozenset[str] | None,
    ) -> tuple[list[LexicalHit], dict[str, list[float]]]:
        lexical = self.lexical.search(tokens, top_k=top_k, domain=domains, doc_keys=doc_keys)
        return lexical, (self.store.vectors([h.chunk_id for h in lexical], for_read=True) if lexical else {})

    @staticmethod
    def _hits(
        order: list[str],
        dense: list[ChunkHit],
        lexical: list[LexicalHit],
        stored: dict[str, list[float]],
        vector: list[float],
    ) -> tuple[ChunkHit, ...]:
        by_id = {h.chunk_id: h for h in dense}
        only_lexical = {h.chunk_id: h for h in lexical if h.chunk_id not in by_id and h.chunk_id in order}
        q = np.asarray(vector, dtype=np.float32)
        for chunk_id, hit in only_lexical.items():
            if chunk_id not in stored:
                # In the lexical index, not (or not yet) in Milvus: check_index reports such drift.
                logger.debug("lexical hit %s has no vector; left out", chunk_id)
                continue
            distance = float(((np.asarray(stored[chunk_id], dtype=np.float32) - q) ** 2).sum())
            by_id[chunk_id] = ChunkHit(
                hit.chunk_id, hit.doc_key, hit.domain, hit.chunk_index, distance, hit.text
            )
        scores = {h.chunk_id: h.score for h in lexical}
        return tuple(
            dataclasses.replace(by_id[chunk_id], lexical_score=scores.get(chunk_id))
            for chunk_id in order
            if chunk_id in by_id
        )
