"""The vector index's parameters: defaults per index type, the settings over them, and a
collection of each type created, written and searched on the store the tests run against
(milvus-lite, or Milvus 2.3.5 standalone in CI, which refuses an IVF index without ``nlist``)."""

import numpy as np
import pytest

from knowledge import milvus_index
from knowledge.vectorstore import ChunkVector
from tests.support.small_domain import indexed_and_loaded, small_domain_searched

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


def test_a_filtered_search_of_an_ivf_index_finds_the_rows_of_a_small_domain(vector_store):
    """An IVF index scans the lists nearest the query and keeps what the filter keeps there, on
    milvus-lite and on a Milvus server alike: a domain holding 0.1% of the rows mostly lies in other
    lists. Told the filter's share, the search scans enough lists to find that domain's nearest
    rows (``milvus_index.filtered_search_params``); without it, it misses some."""
    vector_store.index_type, vector_store.index_params, vector_store.search_params = "IVF_FLAT", {}, {}
    assert vector_store.filter_share_matters
    found_without = small_domain_searched(vector_store, indexed_and_loaded)
    assert found_without < 0.9, "the IVF index found the small domain unaided"


def test_which_index_a_filter_share_widens_and_how_far():
    fsp = milvus_index.filtered_search_params
    # IVF on any store: nprobe / share lists, at most every list of the index
    assert fsp("IVF_FLAT", {"nprobe": 32}, top_k=10, filter_share=0.01, lite=False) == {"nprobe": 1024}
    assert fsp("IVF_SQ8", {"nprobe": 32}, top_k=10, filter_share=0.5, lite=False) == {"nprobe": 64}
    assert fsp("IVF_FLAT", {"nprobe": 8}, top_k=10, filter_share=0.01, index={"nlist": 128}) == {
        "nprobe": 128
    }
    assert fsp("IVF_PQ", {"nprobe": 500}, top_k=10, filter_share=0.9, index={"nlist": 1024}) == {
        "nprobe": 556
    }
    # never fewer lists than configured
    assert fsp("IVF_PQ", {"nprobe": 2000}, top_k=10, filter_share=0.5, index={"nlist": 1024}) == {
        "nprobe": 2000
    }
    # a server's graph index is left alone; milvus-lite's walks further (ef)
    assert fsp("HNSW", {"ef": 64}, top_k=10, filter_share=0.01, lite=False) == {"ef": 64}
    assert fsp("HNSW", {"ef": 64}, top_k=10, filter_share=0.01, lite=True) == {"ef": 4000}
    for share in (None, 0.0, 1.0):  # no filter, nothing kept, everything kept: as configured
        assert fsp("IVF_FLAT", {"nprobe": 32}, top_k=10, filter_share=share) == {"nprobe": 32}
    assert fsp("FLAT", {}, top_k=10, filter_share=0.01) == {}
    assert [milvus_index.filter_widens(t, lite=False) for t in ("IVF_FLAT", "HNSW", "AUTOINDEX", "FLAT")] == [
        True,
        False,
        False,
        False,
    ]
    assert [milvus_index.filter_widens(t, lite=True) for t in ("ivf_sq8", "HNSW", "AUTOINDEX", "FLAT")] == [
        True,
        True,
        True,
        False,
    ]
