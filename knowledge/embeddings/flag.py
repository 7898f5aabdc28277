"""FlagEmbedding backends: BGE-M3 (the production model) and FlagModel on a local folder."""

from __future__ import annotations

import numpy as np

from knowledge.embeddings.base import Embedder, EmbeddingError


def _gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


class BgeM3Embedder(Embedder):
    """BGEM3FlagModel dense vectors (1024-d for BAAI/bge-m3). fp16 only on a GPU."""

    def __init__(
        self, *, model: str, max_length: int = 512, use_fp16: bool = True, batch_size: int = 32
    ) -> None:
        try:
            from FlagEmbedding import BGEM3FlagModel

            self._model = BGEM3FlagModel(
                model,
                use_fp16=use_fp16 and _gpu_available(),
                devices=None if _gpu_available() else "cpu",
                passage_max_length=max_length,
                query_max_length=max_length,
            )
        except Exception as exc:
            raise EmbeddingError(f"cannot load BGE-M3 model '{model}': {exc}") from exc
        self.model_name = f"bge-m3:{model}"
        self.max_length = max_length
        self.batch_size = batch_size
        self.dim = int(self._model.model.config.hidden_size)

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = self._model.encode(
            texts,
            batch_size=self.batch_size,
            max_length=self.max_length,
            return_dense=True,
            return_sparse=False,
            return_colbert_vecs=False,
        )
        return np.asarray(out["dense_vecs"], dtype=np.float32).reshape(len(texts), -1)


class FlagModelEmbedder(Embedder):
    """FlagEmbedding's FlagModel on a local encoder folder, with configurable pooling."""

    def __init__(
        self,
        *,
        model: str,
        pooling: str = "cls",
        max_length: int = 512,
        use_fp16: bool = True,
        batch_size: int = 32,
    ) -> None:
        try:
            from FlagEmbedding import FlagModel

            self._model = FlagModel(
                model,
                pooling_method=pooling,
                use_fp16=use_fp16 and _gpu_available(),
                devices=None if _gpu_available() else "cpu",
                passage_max_length=max_length,
                query_max_length=max_length,
            )
        except Exception as exc:
            raise EmbeddingError(f"cannot load FlagModel '{model}': {exc}") from exc
        self.model_name = f"flag:{model}:{pooling}"
        self.max_length = max_length
        self.batch_size = batch_size
        self.dim = int(self._model.model.config.hidden_size)

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = self._model.encode(texts, batch_size=self.batch_size, max_length=self.max_length)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
