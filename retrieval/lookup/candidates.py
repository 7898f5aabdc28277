"""Stage "candidates": what L0 (the keyword index) and L1 (chunk search in Milvus) find.

L0 sees every searchable document's keywords, aliases and title; L1 the ``top_k`` best chunks,
within the agent's domains and of the documents the call's metadata condition lets through
(``filtering``: searched inside Milvus and the lexical engine, so ``top_k`` are all eligible). When vector search is down (Milvus or the embedder), L1 finds nothing
and says why (``degraded``): the lookup still answers from L0, with status DEGRADED.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from knowledge.embeddings import EmbeddingError
from knowledge.vectorstore import VectorStoreError
from retrieval.lookup.corpus import corpus_signature
from retrieval.lookup.filtering import DocumentFilter
from retrieval.lookup.keyword_index import L0Match, keyword_index_get
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.search import ChunkHit
from retrieval.lookup.vector_search import l1_search

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeywordCandidates:
    #: the corpus signature the index was read at: L1's cache is keyed by the same one
    signature: tuple
    #: every L0 match, best first (``retrieval.lookup.keyword_index``)
    matches: list[L0Match]


@dataclass(frozen=True)
class ChunkCandidates:
    #: chunk hits, best first, each with its raw squared L2 distance
    hits: tuple[ChunkHit, ...] = ()
    #: "hybrid:rrf", "hybrid:weighted" or "dense"; None when vector search was down
    mode: str | None = None
    #: the lexical engine hybrid search read ("tantivy" or "milvus"); None in dense mode or down
    lexical_engine: str | None = None
    embedding_model: str | None = None
    vector_cached: bool = False
    hits_cached: bool = False
    embed_ms: float = 0.0
    search_ms: float = 0.0
    degraded: tuple[str, ...] = ()

    @property
    def down(self) -> bool:
        return bool(self.degraded)


def keyword_candidates(request: LookupRequest) -> KeywordCandidates:
    signature = corpus_signature()
    return KeywordCandidates(signature, keyword_index_get(signature=signature).match(request.query))


def chunk_candidates(
    request: LookupRequest, keyword: KeywordCandidates, filtered: DocumentFilter
) -> ChunkCandidates:
    """L1 times its own embedding and search (``embed_ms``, ``search_ms``): a cached query costs
    neither."""
    try:
        l1 = l1_search(
            query=request.query,
            top_k=request.top_k,
            signature=keyword.signature,
            domain=request.domains,
            doc_keys=filtered.doc_keys,
        )
    except (EmbeddingError, VectorStoreError) as exc:
        logger.warning("lookup without vector search: %s", exc)
        return ChunkCandidates(degraded=(f"vector search unavailable: {exc}",))
    return ChunkCandidates(
        hits=l1.hits,
        mode=l1.mode,
        lexical_engine=l1.lexical_engine,
        embedding_model=l1.embedding_model,
        vector_cached=l1.vector_cached,
        hits_cached=l1.hits_cached,
        embed_ms=round(l1.embed_ms, 2),
        search_ms=round(l1.search_ms, 2),
    )
