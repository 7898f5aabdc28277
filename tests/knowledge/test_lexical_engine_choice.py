"""LEXICAL_ENGINE: auto puts the lexical index in tantivy beside milvus-lite or a Milvus without
BM25, and in Milvus on a server that has the BM25 function; the choice is logged once."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ImproperlyConfigured

from knowledge.lexical import get_lexical_engine, lexical_engine_choice, reset_lexical_engine
from knowledge.lexical.choice import lexical_engine_decide, lexical_engine_setting
from knowledge.vectorstore import VectorStore, bm25_supported


def server(version: str) -> VectorStore:
    """A store on a Milvus server that reports ``version`` (asked nothing else)."""
    store = VectorStore(uri="http://127.0.0.1:1", collection="c")
    store._version = version
    return store


@pytest.mark.parametrize(
    ("version", "engine"),
    [
        ("milvus_lite-3.2.2", "tantivy"),  # a milvus-lite server: BM25 in a Python loop
        ("v2.3.5", "tantivy"),  # no BM25 function
        ("v2.4.17", "tantivy"),
        ("v2.5.4", "milvus"),
        ("2.6.0", "milvus"),
    ],
)
def test_auto_chooses_by_what_the_server_is(version, engine):
    assert lexical_engine_decide(setting="auto", store=server(version)).name == engine


def test_auto_chooses_tantivy_for_embedded_milvus_lite_without_asking_anything(tmp_path):
    store = VectorStore(uri=str(tmp_path / "milvus.db"), collection="c")
    choice = lexical_engine_decide(setting="auto", store=store)
    assert (choice.name, store._client) == ("tantivy", None)
    assert "embedded milvus-lite" in choice.reason


def test_a_forced_engine_wins_and_milvus_without_bm25_is_refused(tmp_path):
    assert lexical_engine_decide(setting="tantivy", store=server("v2.5.4")).name == "tantivy"
    assert lexical_engine_decide(setting="milvus", store=server("v2.5.4")).name == "milvus"
    lite = lexical_engine_decide(
        setting="milvus", store=VectorStore(uri=str(tmp_path / "m.db"), collection="c")
    )
    assert lite.name == "milvus" and "slow" in lite.reason
    with pytest.raises(ImproperlyConfigured, match=r"LEXICAL_ENGINE=milvus needs Milvus >= 2\.5"):
        lexical_engine_decide(setting="milvus", store=server("v2.3.5"))


def test_an_unknown_setting_names_the_variable(settings):
    settings.LEXICAL_ENGINE = "elastic"
    with pytest.raises(ImproperlyConfigured, match="LEXICAL_ENGINE must be one of auto, tantivy, milvus"):
        lexical_engine_setting()


def test_bm25_support_is_read_from_the_version_string():
    assert bm25_supported("milvus_lite-3.2.2") and bm25_supported("v2.5.0")
    assert not bm25_supported("v2.4.9") and not bm25_supported("unknown")


def test_the_process_decides_once_and_logs_it(settings, tmp_path, caplog):
    settings.LEXICAL_ENGINE = "auto"
    settings.LEXICAL_INDEX_DIR = str(tmp_path / "lexical")
    reset_lexical_engine()
    try:
        with caplog.at_level(logging.INFO, logger="knowledge.lexical.choice"):
            engine = get_lexical_engine()
            assert get_lexical_engine() is engine
        assert engine.name == "tantivy" and str(engine.path) == settings.LEXICAL_INDEX_DIR
        assert lexical_engine_choice().name == "tantivy"
        logged = [r.getMessage() for r in caplog.records]
        assert len(logged) == 1 and logged[0].startswith("lexical engine: tantivy in ")
    finally:
        reset_lexical_engine()


@pytest.mark.slow
def test_a_milvus_lite_server_gets_tantivy_too(milvus_server):
    store = VectorStore(uri=milvus_server, collection="c")
    try:
        choice = lexical_engine_decide(setting="auto", store=store)
        assert choice.name == "tantivy" and "milvus-lite server" in choice.reason
    finally:
        store.reset()


def test_manage_py_check_names_a_bad_lexical_engine(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.LEXICAL_ENGINE = "elastic"
    with pytest.raises(SystemCheckError, match=r"knowledge\.E001.*LEXICAL_ENGINE must be one of"):
        call_command("check")
