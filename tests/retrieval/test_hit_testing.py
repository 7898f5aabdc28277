"""Hit testing: staff see what a query would get (L0 matches, L1 candidates as cards with the chunk
text, raw score and similarity, level and hint) without marking the session or recording an
invocation, as a chosen agent (its session, its scope) and limited to chosen domains. Runs the
real lookup on a real corpus (embedder + Milvus), as the lookup's own tests do."""

import re
import uuid

import pytest
from django.urls import reverse

from knowledge.lexical import get_lexical_engine
from knowledge.models import DocumentChunk, KnowledgeDomain
from observability.models import ToolInvocation
from retrieval.agents.tokens import agent_token_issue, tool_token_issue
from retrieval.agents.tracker import get_tracker, reset_tracker
from retrieval.lookup.corpus import corpus_signature_forget
from retrieval.lookup.keyword_index import keyword_index_forget
from retrieval.lookup.thresholds import thresholds_cache_clear
from retrieval.lookup.vector_search import l1_caches_clear
from retrieval.models import AgentProfile
from retrieval.services import lookup_knowledge
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
    for domain in ("infrastructure", "api", "troubleshooting", "payment"):
        KnowledgeDomain.objects.get_or_create(domain_id=domain)
    yield corpus
    _forget()


def _agent(name: str, *, domains: tuple[str, ...] = ()):
    user = tool_token_issue(name=name).user
    if domains:
        AgentProfile.objects.get(user=user).allowed_domains.set(
            KnowledgeDomain.objects.filter(domain_id__in=domains)
        )
    return user


def test_hit_test_shows_matches_level_and_hint_without_side_effects(admin_client, seeded_corpus):
    agent = _agent("hit-agent")
    session = f"hit-{uuid.uuid4().hex}"
    response = admin_client.get(
        reverse(URL), {"query": "ERR_TIMEOUT", "agent": agent.pk, "session_id": session}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert response.context["result"]["body"]["relevanceLevel"] == "PRECISE"
    assert "知识库中不存在比上述结果更精准的文档" in html  # the hint the agent would get
    # The search in force is named: hybrid L1 and where BM25 ran (tantivy beside milvus-lite by
    # default; Milvus's own with LEXICAL_ENGINE=milvus).
    engine = get_lexical_engine().name
    assert response.context["details"]["lexical_engine"] == engine
    assert f"hybrid:rrf · BM25 位于 {engine}" in html or f"hybrid:rrf · BM25 in {engine}" in html
    # ... and what the Milvus deployment supports (why BM25 runs where it does).
    from knowledge.vectorstore import get_vector_store

    summary = get_vector_store().capabilities().summary()
    assert response.context["milvus_capabilities"] == summary and f"Milvus {summary}" in html
    assert [key for key, _ in response.context["l0"]] == ["api/error-codes.md"]
    candidates = response.context["candidates"]
    assert candidates and all({"score", "similarity", "doc_key"} <= set(c) for c in candidates)
    assert any(c["doc_key"] == "api/error-codes.md" and c["returned"] for c in candidates)
    # Nothing recorded, the session not marked.
    assert not ToolInvocation.objects.exists()
    assert get_tracker().get_retrieved_domains(f"a{agent.pk}:{session}") == []


def test_hit_test_for_a_session_reads_the_chosen_agents_session(admin_client, seeded_corpus):
    honest, other = _agent("hit-honest"), _agent("hit-other")
    session = f"hit-{uuid.uuid4().hex}"
    # A real call of the honest agent marks its session.
    lookup_knowledge(query="ERR_TIMEOUT", session_id=session, agent=honest.username, agent_id=honest.pk)
    assert ToolInvocation.objects.count() == 1
    response = admin_client.get(
        reverse(URL), {"query": "ERR_TIMEOUT", "agent": honest.pk, "session_id": session}
    )
    result = response.context["result"]
    assert result["body"]["relevanceLevel"] == "DEDUPED"
    assert result["details"]["dedup_reason"] == "doc_retrieved"
    assert "api/error-codes.md" in result["details"]["withheld_doc_keys"]
    withheld = [c for c in response.context["candidates"] if c["doc_key"] == "api/error-codes.md"]
    assert withheld and all(c["withheld"] and not c["returned"] for c in withheld)
    # The same session id of another agent is another session: it has retrieved nothing.
    theirs = admin_client.get(
        reverse(URL), {"query": "ERR_TIMEOUT", "agent": other.pk, "session_id": session}
    )
    assert theirs.context["result"]["body"]["relevanceLevel"] == "PRECISE"
    # A session id without an agent names no session: the form asks for the agent.
    unowned = admin_client.get(reverse(URL), {"query": "ERR_TIMEOUT", "session_id": session})
    assert "agent" in unowned.context["form"].errors and "result" not in unowned.context
    assert ToolInvocation.objects.count() == 1


def test_hit_test_limited_to_chosen_domains(admin_client, seeded_corpus):
    everywhere = admin_client.get(reverse(URL), {"query": "数据库连接池配置"})
    assert "infrastructure/mysql-pool.md" in everywhere.context["result"]["details"]["returned_doc_keys"]
    assert everywhere.context["search_domains"] is None
    limited = admin_client.get(reverse(URL), {"query": "数据库连接池配置", "domains": ["api", "payment"]})
    details = limited.context["result"]["details"]
    assert limited.context["search_domains"] == ["api", "payment"]
    assert not {"infrastructure", "troubleshooting"} & set(details["returned_domains"])
    # The domains filter the Milvus search itself: every candidate is theirs, none left out.
    assert limited.context["candidates"]
    assert {c["domain"] for c in limited.context["candidates"]} <= {"api", "payment"}
    assert limited.context["left_out"] == 0
    assert 'id="hit-left-out"' not in limited.content.decode()
    refused = admin_client.get(reverse(URL), {"query": "x", "domains": ["no-such-domain"]})
    assert "domains" in refused.context["form"].errors


def test_a_scoped_agents_scope_applies_and_narrows_the_chosen_domains(admin_client, seeded_corpus):
    scoped = _agent("hit-scoped", domains=("api",))
    response = admin_client.get(reverse(URL), {"query": "数据库连接池配置", "agent": scoped.pk})
    assert response.context["search_domains"] == ["api"] and response.context["scope"] == ["api"]
    assert set(response.context["result"]["details"]["returned_domains"]) <= {"api"}
    assert "infrastructure" not in str(response.context["result"]["body"])
    # Chosen domains are searched only inside the scope; none inside it is a clear error.
    both = admin_client.get(
        reverse(URL), {"query": "ERR_TIMEOUT", "agent": scoped.pk, "domains": ["api", "payment"]}
    )
    assert both.context["search_domains"] == ["api"]
    outside = admin_client.get(
        reverse(URL), {"query": "ERR_TIMEOUT", "agent": scoped.pk, "domains": ["payment"]}
    )
    errors = outside.context["form"].errors["domains"]
    assert "result" not in outside.context and "api" in errors[0]


def test_candidate_cards_show_the_chunk_text_heading_pages_and_link(admin_client, seeded_corpus):
    DocumentChunk.objects.filter(document__doc_key="infrastructure/mysql-pool.md", chunk_index=0).update(
        pages="3-4"
    )
    response = admin_client.get(reverse(URL), {"query": "数据库连接池配置", "domains": ["infrastructure"]})
    card = next(
        c
        for c in response.context["candidates"]
        if c["doc_key"] == "infrastructure/mysql-pool.md" and c["chunk_index"] == 0
    )
    assert card["preview"] == "数据库连接池配置\n如何配置数据库连接池"
    assert "概述" in card["heading_path"] and card["pages"] == "3-4"
    assert card["returned"] and card["level"] in {"HIGHLY_RELEVANT", "PRECISE", "REFERENCE"}
    assert card["document_url"] == reverse(
        "admin:knowledge_apidocument_change",
        args=[DocumentChunk.objects.get(document__doc_key=card["doc_key"], chunk_index=0).document_id],
    )
    html = response.content.decode()
    assert f'href="{card["document_url"]}"' in html and "如何配置数据库连接池" in html
    assert 'class="okb-hit-card"' in html


def test_hostile_query_chunk_text_and_agent_names_render_safely(
    admin_client, seeded_corpus, django_user_model
):
    from tests.observability.test_hostile_rows import COMBINING

    script = "<script>alert(1)</script>\"'&"
    hostile_chunk = script + COMBINING + "x" * 5000
    DocumentChunk.objects.filter(document__doc_key="infrastructure/mysql-pool.md", chunk_index=0).update(
        content=hostile_chunk, heading_path=script + COMBINING
    )
    # A user name holds 150 characters (MariaDB enforces it): a shorter tower.
    # tool_token_issue refuses such names; a user written straight into the database still has one.
    hostile_agent = django_user_model.objects.create(username=script + "e" + "\u0301" * 100)
    agent_token_issue(user=hostile_agent)  # its token and profile
    response = admin_client.get(
        reverse(URL), {"query": "数据库连接池配置 " + script + COMBINING, "agent": hostile_agent.pk}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # Combining towers are cut everywhere on the page but in the query box, which keeps what staff
    # typed (a textarea draws inside its own box).
    outside_the_box = re.sub(r"<textarea[^>]*>.*?</textarea>", "", html, flags=re.S)
    assert "\u0301" * 4 not in outside_the_box
    card = next(c for c in response.context["candidates"] if c["doc_key"] == "infrastructure/mysql-pool.md")
    assert len(card["preview"]) <= 400 and card["full_text"]
    assert response.context["recent_tests"][0]["agent"].startswith("<script>")  # escaped when shown


def test_hit_test_bad_input_names_the_field(admin_client, db):
    response = admin_client.get(reverse(URL), {"query": ""})
    assert response.status_code == 200
    assert "query" in response.context["form"].errors and "result" not in response.context


def test_hit_test_takes_top_k_draws_threshold_lines_and_lists_the_last_tests(
    admin_client, seeded_corpus, settings
):
    settings.RETRIEVAL_LEVELS = "thresholds"  # the similarity lines of the seeds' rule
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
