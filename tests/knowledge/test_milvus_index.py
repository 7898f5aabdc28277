"""The vector index's parameters: defaults per index type, the settings over them, and a
collection of each type created, written and searched on the store the tests run against
(milvus-lite, or Milvus 2.3.5 standalone in CI, which refuses an IVF index without ``nlist``)."""

import numpy as np
import pytest

from knowledge import milvus_index
from knowledge.vectorstore import ChunkVector

# Every test here is about Milvus itself: part of the run on Milvus 2.3.5 standalone (-m vectors).
pytestmark = pytest.mark.vectors


def test_each_index_type_gets_the_parameters_it_needs_and_the_settings_override_them():
    assert milvus_index.index_params("IVF_FLAT") == {"nlist": 1024}
    assert milvus_index.index_params("hnsw") == {"M": 16, "efConstruction": 200}
    assert milvus_index.index_params("AUTOINDEX") == {}
    assert milvus_index.index_params("IVF_FLAT", {"nlist": 64}) == {"nlist": 64}
    assert milvus_index.search_params("IVF_FLAT", None, top_k=20) == {"nprobe": 32}
    assert milvus_index.search_params("IVF_FLAT", {"nprobe": 4}, top_k=20) == {"nprobe": 4}
    assert milvus_index.search_params("FLAT", None, top_k=20) == {}
    # HNSW answers at most ef hits: ef is raised to what is asked for
    assert milvus_index.search_params("HNSW", {"ef": 8}, top_k=20) == {"ef": 20}
    assert milvus_index.search_params("HNSW", None, top_k=10) == {"ef": 64}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("MILVUS_INDEX_PARAMS", "nlist=1024", "MILVUS_INDEX_PARAMS must be a JSON object"),
        ("MILVUS_SEARCH_PARAMS", "[32]", "MILVUS_SEARCH_PARAMS must be a JSON object"),
    ],
)
def test_malformed_index_parameters_are_refused_at_start_naming_the_setting(name, value, message):
    from tests.support.settings_start import django_setup

    out = django_setup({name: value})
    assert out.returncode != 0
    assert message in out.stderr


@pytest.mark.parametrize(
    ("index_type", "index_params", "search_params"),
    [("IVF_FLAT", {}, {}), ("IVF_FLAT", {"nlist": 8}, {"nprobe": 8}), ("HNSW", {}, {"ef": 16})],
)
def test_a_collection_of_each_index_type_is_created_written_and_searched(
    vector_store, index_type, index_params, search_params
):
    vector_store.index_type = index_type
    vector_store.index_params, vector_store.search_params = index_params, search_params
    vector_store.ensure_collection(dim=4, model_name="test")
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((40, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vector_store.upsert(
        [
            ChunkVector(
                chunk_id=f"d{i}.md#0", vector=v.tolist(), domain="x", doc_key=f"d{i}.md", chunk_index=0
            )
            for i, v in enumerate(vectors)
        ]
    )
    hits = vector_store.search(vectors[7].tolist(), top_k=20)
    assert hits[0].doc_key == "d7.md"
    distances = [h.l2_distance for h in hits]
    assert distances == sorted(distances) and len(hits) > 1
