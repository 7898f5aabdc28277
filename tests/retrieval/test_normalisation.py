"""FS-1 (L2 distance normalisation) and FS-2 (relevance levels), one test per acceptance criterion."""

import numpy as np
import pytest

from knowledge.vectorstore import ChunkVector
from retrieval.lookup.normalisation import (
    RelevanceLevel,
    completeness_hint,
    relevance_level_decide,
    similarity_from_l2,
)
from retrieval.lookup.thresholds import Thresholds, current_thresholds

DEFAULT = Thresholds(max_l2_distance=2.0, highly_relevant=0.75, reference=0.5)


# --- FS-1 ----------------------------------------------------------------------------------------
def test_fs1_score_0_is_similarity_1():
    assert similarity_from_l2(0.0, max_l2=2.0) == 1.0


def test_fs1_score_1_is_similarity_half():
    assert similarity_from_l2(1.0, max_l2=2.0) == 0.5


def test_fs1_score_2_is_similarity_0():
    assert similarity_from_l2(2.0, max_l2=2.0) == 0.0


def test_fs1_score_3_beyond_the_bound_is_clipped_to_0():
    assert similarity_from_l2(3.0, max_l2=2.0) == 0.0


def test_fs1_seed_table_values():
    # seed 000 section 3: 0.383 -> 0.8085, 0.5 -> 0.75, 0.6031 -> 0.6984
    assert similarity_from_l2(0.383, max_l2=2.0) == pytest.approx(0.8085)
    assert similarity_from_l2(0.5, max_l2=2.0) == pytest.approx(0.75)
    assert similarity_from_l2(0.6031, max_l2=2.0) == pytest.approx(0.69845)


@pytest.mark.django_db
def test_fs1_settings_override_the_defaults(settings):
    settings.RETRIEVAL_MAX_L2_DISTANCE = 4.0
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.8
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.6
    thresholds = current_thresholds()
    assert (thresholds.max_l2_distance, thresholds.highly_relevant, thresholds.reference) == (4.0, 0.8, 0.6)
    assert similarity_from_l2(1.0, max_l2=thresholds.max_l2_distance) == 0.75


def test_fs1_raw_milvus_score_of_unit_vectors_gives_the_cosine(vector_store):
    """Milvus returns the SQUARED L2 distance (2 - 2cos for unit vectors): fed raw into the
    formula it yields exactly the cosine similarity."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(6, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vector_store.ensure_collection(dim=16, model_name="unit-test")
    vector_store.upsert([ChunkVector(f"d{i}#0", vectors[i].tolist(), "x", f"d{i}", 0) for i in range(1, 6)])
    hits = vector_store.search(vectors[0].tolist(), top_k=5)
    assert len(hits) == 5
    for hit in hits:
        i = int(hit.doc_key[1:])
        cos = float(vectors[0] @ vectors[i])
        assert similarity_from_l2(hit.l2_distance, max_l2=2.0) == pytest.approx(max(cos, 0.0), abs=1e-5)


# --- FS-2 ----------------------------------------------------------------------------------------
def test_fs2_one_l0_match_is_precise():
    assert relevance_level_decide(l0_match_count=1, top_similarity=None, thresholds=DEFAULT) == "PRECISE"
    assert relevance_level_decide(l0_match_count=1, top_similarity=0.3, thresholds=DEFAULT) == "PRECISE"


def test_fs2_two_l0_matches_and_similarity_08_is_highly_relevant():
    level = relevance_level_decide(l0_match_count=2, top_similarity=0.8, thresholds=DEFAULT)
    assert level == RelevanceLevel.HIGHLY_RELEVANT


def test_fs2_no_l0_and_similarity_08_is_highly_relevant():
    level = relevance_level_decide(l0_match_count=0, top_similarity=0.8, thresholds=DEFAULT)
    assert level == RelevanceLevel.HIGHLY_RELEVANT


def test_fs2_three_l0_matches_and_similarity_06_is_reference():
    level = relevance_level_decide(l0_match_count=3, top_similarity=0.6, thresholds=DEFAULT)
    assert level == RelevanceLevel.REFERENCE


def test_fs2_no_l0_and_similarity_04_is_not_a_result():
    assert relevance_level_decide(l0_match_count=0, top_similarity=0.4, thresholds=DEFAULT) is None
    assert relevance_level_decide(l0_match_count=0, top_similarity=None, thresholds=DEFAULT) is None


def test_fs2_boundaries_and_l0_matches_without_l1():
    assert (
        relevance_level_decide(l0_match_count=0, top_similarity=0.75, thresholds=DEFAULT) == "HIGHLY_RELEVANT"
    )
    assert relevance_level_decide(l0_match_count=0, top_similarity=0.5, thresholds=DEFAULT) == "REFERENCE"
    assert relevance_level_decide(l0_match_count=0, top_similarity=0.4999, thresholds=DEFAULT) is None
    assert relevance_level_decide(l0_match_count=2, top_similarity=None, thresholds=DEFAULT) == "REFERENCE"
    assert relevance_level_decide(l0_match_count=2, top_similarity=0.2, thresholds=DEFAULT) == "REFERENCE"


def test_fs2_each_level_has_its_seed_hint():
    assert completeness_hint(RelevanceLevel.PRECISE) == "知识库中不存在比上述结果更精准的文档"
    assert completeness_hint("HIGHLY_RELEVANT") == "当前结果已高度相关，继续检索不太可能找到更精准的文档"
    assert completeness_hint("REFERENCE") == "当前结果为相关参考，如需更精准信息请明确缺少的具体维度"
    assert completeness_hint(RelevanceLevel.DEDUPED) is None
    assert completeness_hint(None) is None


def test_fs2_hints_are_configurable(settings):
    settings.RETRIEVAL_HINT_REFERENCE = "仅供参考"
    assert completeness_hint("REFERENCE") == "仅供参考"
