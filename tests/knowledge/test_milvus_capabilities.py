"""What a Milvus deployment supports, the schema that follows, and check_index's migration report.

The last tests run only against a Milvus server without sparse vectors (Milvus 2.3.5 standalone,
``MILVUS_URI`` as `.ci/run` sets it): they create, load and search a collection there, and make
sure a sparse-field collection is reported without ever being loaded (that aborts the server).
"""

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from knowledge.milvus_capabilities import (
    MIGRATE_COMMAND,
    SPARSE_FIELD,
    capabilities_for,
    is_lite_version,
    schema_problem,
)
from knowledge.vectorstore import ChunkVector, VectorStoreMismatch

# Every test here is about Milvus itself: part of the run on Milvus 2.3.5 standalone (-m vectors).
pytestmark = pytest.mark.vectors

STANDALONE_23 = capabilities_for("v2.3.5-lite")


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()


def _row(doc_key, idx, vec, text=""):
    return ChunkVector(
        chunk_id=f"{doc_key}#{idx}", vector=vec, domain="infra", doc_key=doc_key, chunk_index=idx, text=text
    )


@pytest.mark.parametrize(
    "version, lite, sparse, bm25, hybrid",
    [
        ("milvus_lite-3.2.2", True, True, True, True),
        ("v2.3.5-lite", False, False, False, False),  # the PyPI standalone: "-lite" yet a real server
        ("v2.4.9", False, True, False, True),
        ("v2.5.4", False, True, True, True),
        ("unknown", False, False, False, False),
    ],
)
def test_capabilities_follow_the_server_version(version, lite, sparse, bm25, hybrid):
    caps = capabilities_for(version)
    assert (caps.lite, caps.sparse_vectors, caps.bm25_function, caps.hybrid_search) == (
        lite,
        sparse,
        bm25,
        hybrid,
    )
    assert caps.server_version == version
    assert is_lite_version(version) is lite


def test_embedded_milvus_lite_has_everything():
    caps = capabilities_for("", embedded=True)
    assert caps.lite and caps.sparse_vectors and caps.bm25_function and caps.hybrid_search
    assert "bm25_function" in caps.summary()
    assert capabilities_for("v2.3.5-lite").summary() == "v2.3.5-lite: dense vectors only"


def _description(*fields, functions=()):
    return {"fields": [{"name": name} for name in fields], "functions": [{"name": f} for f in functions]}


def test_schema_problem_names_what_is_wrong_and_the_migration():
    bm25_schema = _description("chunk_id", "vector", "text", SPARSE_FIELD, functions=["text_bm25"])
    dense_schema = _description("chunk_id", "vector", "text")
    problem = schema_problem(bm25_schema, STANDALONE_23, collection="kb", bm25_wanted=False)
    assert problem and "'kb'" in problem and "sparse field" in problem and MIGRATE_COMMAND in problem
    v24 = capabilities_for("v2.4.9")
    problem = schema_problem(bm25_schema, v24, collection="kb", bm25_wanted=False)
    assert problem and "BM25 function text_bm25" in problem and MIGRATE_COMMAND in problem
    v25 = capabilities_for("v2.5.4")
    problem = schema_problem(dense_schema, v25, collection="kb", bm25_wanted=True)
    assert problem and "no BM25 field" in problem and MIGRATE_COMMAND in problem
    assert schema_problem(dense_schema, STANDALONE_23, collection="kb", bm25_wanted=False) is None
    assert schema_problem(bm25_schema, v25, collection="kb", bm25_wanted=True) is None


def test_capabilities_are_asked_once_per_store_and_logged(vector_store, caplog, monkeypatch):
    caplog.set_level("INFO", logger="knowledge.vectorstore")
    first = vector_store.capabilities()
    monkeypatch.setattr(vector_store, "server_version", lambda: pytest.fail("asked again"))
    assert vector_store.capabilities() is first
    assert sum("Milvus capabilities of" in r.getMessage() for r in caplog.records) == 1


def test_dense_only_collection_where_the_server_has_no_bm25(vector_store, monkeypatch, settings):
    settings.LEXICAL_ENGINE = "auto"
    monkeypatch.setattr(vector_store, "_capabilities", STANDALONE_23)
    monkeypatch.setattr(vector_store, "server_version", lambda: "v2.3.5-lite")
    assert not vector_store.bm25_in_collection()
    vector_store.ensure_collection(dim=4, model_name="test")
    names = {field["name"] for field in vector_store.describe()["fields"]}
    assert "text" in names and SPARSE_FIELD not in names
    assert vector_store.schema_problem() is None


def test_a_bm25_collection_on_a_server_without_sparse_vectors_is_refused_and_reported(
    vector_store, settings, monkeypatch, db
):
    if not vector_store.capabilities().bm25_function:
        pytest.skip("needs a store that can build the BM25 collection (milvus-lite or Milvus >= 2.5)")
    settings.LEXICAL_ENGINE = "milvus"
    vector_store.ensure_collection(dim=4, model_name="test")
    assert SPARSE_FIELD in {field["name"] for field in vector_store.describe()["fields"]}
    # The same collection met by a Milvus 2.3 server (and the engine auto, as it would be there).
    settings.LEXICAL_ENGINE = "auto"
    vector_store.reset()
    monkeypatch.setattr(vector_store, "_capabilities", STANDALONE_23)
    monkeypatch.setattr(vector_store, "server_version", lambda: "v2.3.5-lite")
    monkeypatch.setattr(vector_store, "reset", lambda: None)  # keep the stand-in capabilities
    loads = []
    monkeypatch.setattr(vector_store, "_ensure_loaded", lambda: loads.append(1))
    with pytest.raises(VectorStoreMismatch, match="sparse field") as refused:
        vector_store.ensure_collection(dim=4, model_name="test")
    assert MIGRATE_COMMAND in str(refused.value) and not loads
    monkeypatch.setattr(vector_store, "entries", lambda **_: pytest.fail("check_index loaded the vectors"))
    with pytest.raises(CommandError, match="schema does not match"):
        call_command("check_index")
    from io import StringIO

    out = StringIO()
    with pytest.raises(CommandError):
        call_command("check_index", stdout=out)
    assert "sparse field" in out.getvalue() and MIGRATE_COMMAND in out.getvalue()


@pytest.fixture
def milvus_without_sparse(vector_store):
    caps = vector_store.capabilities()
    if caps.lite or caps.sparse_vectors:
        pytest.skip(f"needs a Milvus server without sparse vectors (MILVUS_URI is {caps.server_version})")
    return vector_store


def test_standalone_creates_loads_and_searches_a_dense_only_collection(milvus_without_sparse, settings):
    store = milvus_without_sparse
    settings.LEXICAL_ENGINE = "auto"
    store.ensure_collection(dim=4, model_name="test")
    a, b = _unit([1, 0, 0, 0]), _unit([1, 1, 0, 0])
    store.upsert([_row("a.md", 0, a, "alpha"), _row("b.md", 0, b, "beta")])
    hits = store.search(a, top_k=2, with_text=True)
    assert [h.doc_key for h in hits] == ["a.md", "b.md"] and hits[0].text == "alpha"
    assert hits[1].l2_distance == pytest.approx(2 - 2 * float(np.dot(a, b)), abs=1e-5)
    assert [h.doc_key for h in store.search(b, top_k=5, domain="payments")] == []
    assert SPARSE_FIELD not in {field["name"] for field in store.describe()["fields"]}
    store.ping()


def test_standalone_reports_a_sparse_collection_without_loading_it(milvus_without_sparse):
    from pymilvus import DataType, MilvusClient

    store = milvus_without_sparse
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=512)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field(SPARSE_FIELD, DataType.SPARSE_FLOAT_VECTOR)
    try:
        store.client().create_collection(store.collection, schema=schema)
    except Exception as exc:  # a server that refuses the field outright has nothing to report
        pytest.skip(f"the server refused a sparse field at creation: {exc}")
    problem = store.schema_problem()
    assert problem and "sparse field" in problem and MIGRATE_COMMAND in problem
    with pytest.raises(VectorStoreMismatch):
        store.ensure_collection(dim=4, model_name="test")
    store.ping()  # still alive: nothing loaded the collection
