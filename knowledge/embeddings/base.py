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

    def _encode_query(self, text: str) -> np.ndarray:
        """A lookup's query as a (1, dim) array; the same as a passage unless the model was trained
        with a different prefix or tower for queries (e5's ``query: ``)."""
        return self._encode([text])

    def encode(self, texts: list[str], *, batch_size: int = 32) -> np.ndarray:
        """(len(texts), dim) unit vectors of passages (chunks), encoded in batches."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._guarded(self._encode, texts[start : start + batch_size])
            for start in range(0, len(texts), batch_size)
        ]
        return _unit(np.vstack(parts))

    def encode_query(self, text: str) -> np.ndarray:
        """The (dim,) unit vector of a lookup's query."""
        return _unit(self._guarded(self._encode_query, text))[0]

    def _guarded(self, encode, arg) -> np.ndarray:
        try:
            return np.asarray(encode(arg), dtype=np.float32).reshape(-1, self.dim)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"{self.model_name} failed to encode: {exc}") from exc

    def encode_one(self, text: str) -> np.ndarray:
        """One passage's vector (for a query, ``encode_query``)."""
        return self.encode([text])[0]


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms
