"""Hit testing: staff see what a query would get (L0 matches, L1 candidates with raw score and
similarity, level and hint) without marking the session or recording an invocation. Runs the real
lookup on a real corpus (embedder + Milvus), as the lookup's own tests do."""

import uuid

import pytest
from django.urls import reverse

from observability.models import ToolInvocation
from retrieval.corpus import corpus_signature_forget
from retrieval.keyword_index import keyword_index_forget
from retrieval.services import lookup_knowledge
from retrieval.thresholds import thresholds_cache_clear
from retrieval.tracker import get_tracker, reset_tracker
from retrieval.vector_search import l1_caches_clear
from tests.retrieval.conftest import Corpus, seed_documents

URL = "admin:observability_hittest_changelist"


def _forget() -> None:
    corpus_signature_forget()
    keyword_index_forget()
    l1_caches_clear()
    thresholds_cache_clear()
    reset_tracker()


@pytest.fixture
def seeded_corpus(vector_store, settings):
    from knowledge.embeddings import get_embedder

    settings.RETRIEVAL_INDEX_REFRESH_MS = 0
    _forget()
    embedder = get_embedder()
    vector_store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    corpus = Corpus(vector_store)
    seed_documents(corpus)
    yield corpus
    _forget()


def test_hit_test_shows_matches_level_and_hint_without_side_effects(admin_client, seeded_corpus):
    session = f"hit-{uuid.uuid4().hex}"
    response = admin_client.get(reverse(URL), {"query": "ERR_TIMEOUT", "session_id": session})
    assert response.status_code == 200
    html = response.content.decode()
    assert response.context["result"]["body"]["relevanceLevel"] == "PRECISE"
    assert "知识库中不存在比上述结果更精准的文档" in html  # the hint the agent would get
    assert [key for key, _ in response.context["l0"]] == ["api/error-codes.md"]
    candidates = response.context["candidates"]
    assert candidates and all({"score", "similarity", "doc_key"} <= set(c) for c in candidates)
    assert any(c["doc_key"] == "api/error-codes.md" and c["returned"] for c in candidates)
    # Nothing recorded, the session not marked.
    assert not ToolInvocation.objects.exists()
    assert get_tracker().get_retrieved_domains(session) == []


def test_hit_test_for_a_session_shows_what_it_already_has(admin_client, seeded_corpus):
    session = f"hit-{uuid.uuid4().hex}"
    lookup_knowledge(query="ERR_TIMEOUT", session_id=session)  # a real call: marks the session
    assert ToolInvocation.objects.count() == 1
    response = admin_client.get(reverse(URL), {"query": "ERR_TIMEOUT", "session_id": session})
    result = response.context["result"]
    assert result["body"]["relevanceLevel"] == "DEDUPED"
    assert result["details"]["dedup_reason"] == "doc_retrieved"
    assert "api/error-codes.md" in result["details"]["withheld_doc_keys"]
    assert ToolInvocation.objects.count() == 1


def test_hit_test_bad_input_names_the_field(admin_client, db):
    response = admin_client.get(reverse(URL), {"query": ""})
    assert response.status_code == 200
    assert "query" in response.context["form"].errors and "result" not in response.context


def test_hit_test_takes_top_k_draws_threshold_lines_and_lists_the_last_tests(admin_client, seeded_corpus):
    response = admin_client.get(reverse(URL), {"query": "数据库连接池配置", "top_k": "1"})
    assert response.context["details"]["top_k"] == 1
    rows = response.context["candidate_rows"]
    lines = [r["line"] for r in rows if "line" in r]
    assert lines == ["HIGHLY_RELEVANT", "REFERENCE"]
    # Each line sits where the candidates' similarity crosses it (best first).
    position = {r["line"]: i for i, r in enumerate(rows) if "line" in r}
    for i, row in enumerate(rows):
        if "candidate" in row and row["candidate"]["similarity"] < 0.5:
            assert i > position["REFERENCE"]
    assert "<textarea" in response.content.decode()
    again = admin_client.get(reverse(URL), {"query": "ERR_TIMEOUT"})
    assert [t["query"] for t in again.context["recent_tests"]] == ["ERR_TIMEOUT", "数据库连接池配置"]
    assert 'id="hit-recent"' in again.content.decode()
    refused = admin_client.get(reverse(URL), {"query": "x", "top_k": "0"})
    assert "top_k" in refused.context["form"].errors
