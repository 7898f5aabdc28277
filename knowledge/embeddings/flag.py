"""FlagEmbedding backends: BGE-M3 (the production model) and FlagModel on a local folder.

FlagEmbedding is imported inside the constructors only: importing it costs seconds, and the
default backend does not need it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from knowledge.embeddings.base import Embedder, EmbeddingError

POOLINGS = ("cls", "mean")


def _device() -> str:
    """One device. With several GPUs FlagEmbedding would otherwise start a process pool, which a
    Celery prefork child (a daemon process) is not allowed to do; scale out with workers instead."""
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def bge_m3_model_name(model: str) -> str:
    return f"bge-m3:{model}"


def flag_model_name(model: str, pooling: str) -> str:
    return f"flag:{model}:{pooling}"


def model_hidden_size(model: str) -> int | None:
    """The encoder's output size read from its config, without loading weights (for the start-up
    check). None when it cannot be known without loading (a hub name not in the local cache)."""
    config_file = Path(model) / "config.json"
    try:
        if config_file.is_file():
            return int(json.loads(config_file.read_text())["hidden_size"])
        from transformers import AutoConfig

        return int(AutoConfig.from_pretrained(model, local_files_only=True).hidden_size)
    except Exception:  # unknown without the weights: the embedder reports it once loaded
        return None


class BgeM3Embedder(Embedder):
    """BGEM3FlagModel dense vectors (1024-d for BAAI/bge-m3), normalised. fp16 only on a GPU."""

    def __init__(
        self, *, model: str, max_length: int = 512, use_fp16: bool = True, batch_size: int = 32
    ) -> None:
        try:
            from FlagEmbedding import BGEM3FlagModel

            device = _device()
            self._model = BGEM3FlagModel(
                model,
                # fp16 on a CPU is slow or unsupported; the setting only means "on a GPU".
                use_fp16=use_fp16 and device.startswith("cuda"),
                devices=device,
                batch_size=batch_size,
                passage_max_length=max_length,
                query_max_length=max_length,
            )
        except Exception as exc:
            raise EmbeddingError(f"cannot load BGE-M3 model '{model}' (EMBEDDING_MODEL): {exc}") from exc
        self.model_name = bge_m3_model_name(model)
        self.max_length = max_length
        self.batch_size = batch_size
        # Measured, not read from a config: it is what the collection must hold.
        self.dim = int(self._encode(["warm up"]).shape[1])

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = self._model.encode(
            texts,
            # The caller already batches; one inner batch also keeps FlagEmbedding's progress bars
            # (shown when a call holds >= batch_size texts) out of the worker's log.
            batch_size=len(texts) + 1,
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
        if pooling not in POOLINGS:
            raise EmbeddingError(f"EMBEDDING_POOLING must be one of {', '.join(POOLINGS)}; got '{pooling}'")
        try:
            from FlagEmbedding import FlagModel

            device = _device()
            self._model = FlagModel(
                model,
                pooling_method=pooling,
                use_fp16=use_fp16 and device.startswith("cuda"),
                devices=device,
                batch_size=batch_size,
                passage_max_length=max_length,
                query_max_length=max_length,
            )
        except Exception as exc:
            raise EmbeddingError(f"cannot load FlagModel '{model}' (EMBEDDING_MODEL): {exc}") from exc
        self.model_name = flag_model_name(model, pooling)
        self.max_length = max_length
        self.batch_size = batch_size
        self.dim = int(self._encode(["warm up"]).shape[1])

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = self._model.encode(texts, batch_size=len(texts) + 1, max_length=self.max_length)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
