from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class EmbeddingError(Exception):
    """The embedding model could not be loaded or failed to encode."""


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    #: identifies the model in the vector store; a different name means different vectors.
    model_name: str
    dim: int

    @abstractmethod
    def _encode(self, texts: list[str]) -> np.ndarray: ...

    def encode(self, texts: list[str], *, batch_size: int = 32) -> np.ndarray:
        """(len(texts), dim) unit vectors, encoded in batches."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), batch_size):
            try:
                parts.append(np.asarray(self._encode(texts[start : start + batch_size]), dtype=np.float32))
            except EmbeddingError:
                raise
            except Exception as exc:
                raise EmbeddingError(f"{self.model_name} failed to encode: {exc}") from exc
        vectors = np.vstack(parts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]
