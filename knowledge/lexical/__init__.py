"""The lexical side of L1: BM25 over the chunk text, beside the vectors.

Where it lives is decided once per process (``choice``, ``LEXICAL_ENGINE``): a tantivy index in
the var folder on the embedded default (``tantivy_index``), or Milvus's own BM25 function in the
collection on a Milvus >= 2.5 server (``milvus_bm25``). Both sit behind one interface
(``engine.LexicalEngine``) and read one analyser (``analyser``).

For the lookup::

    from knowledge.lexical import lexical_search, query_tokens

    hits = lexical_search(query_tokens(text), top_k=20, domain={"payment", "api"})
    # [LexicalHit(chunk_id, doc_key, domain, chunk_index, score, text), ...], best BM25 first

Indexing writes through ``knowledge.services.lexical`` (the same swap as the vectors), and
``check_index`` / ``reindex --lexical-only`` keep the index in step with the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from knowledge.lexical.analyser import analyse, analyser_signature, query_tokens
from knowledge.lexical.choice import (
    EngineChoice,
    get_lexical_engine,
    lexical_engine_choice,
    reset_lexical_engine,
)
from knowledge.lexical.engine import LexicalChunk, LexicalEngine, LexicalEntry, LexicalHit, LexicalIndexError


def lexical_search(
    tokens: Sequence[str], *, top_k: int, domain: str | Iterable[str] | None = None
) -> list[LexicalHit]:
    """The ``top_k`` chunks best matching the analysed query ``tokens`` (``query_tokens``) by BM25,
    best first, of ``domain``: one name, a set of names (an empty set matches nothing), or None /
    "" for every domain, exactly as the vector search filters. No database query: every field of
    a hit comes from the index. Raises LexicalIndexError (a VectorStoreError) when the index
    cannot be read."""
    return get_lexical_engine().search(tokens, top_k=top_k, domain=domain)


__all__ = [
    "EngineChoice",
    "LexicalChunk",
    "LexicalEngine",
    "LexicalEntry",
    "LexicalHit",
    "LexicalIndexError",
    "analyse",
    "analyser_signature",
    "get_lexical_engine",
    "lexical_engine_choice",
    "lexical_search",
    "query_tokens",
    "reset_lexical_engine",
]
