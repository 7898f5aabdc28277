"""The lookup service on a real corpus: levels, supplements, withholding, domain dedup (FS-2 to FS-4,
seed 000 Phase 2), dry runs for hit testing, and answering when a part is down."""

import pytest
from django.core.exceptions import ValidationError

from knowledge.models import ApiDocument
from knowledge.vectorstore import reset_vector_store
from observability.models import ToolInvocation
from retrieval.agents.identity import memory_session_key
from retrieval.agents.tracker import get_tracker
from retrieval.services import lookup_knowledge
from tests.conftest import free_port

# FS-2..FS-4 as the seeds state them (see the seeds_rules fixture).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seeds_rules")]

SCORE_WORDS = ("score", "similarity", "distance")


@pytest.fixture
def corpus(reused_corpus):
    """This module's corpus, on the collection the lookup tests share (it is emptied after each
    test): the lookup, not the collection's creation, is what these tests time."""
    return reused_corpus


def _memory_key(session_id):
    # A call without a token agent (as these are) keeps its session under the unnamed agent.
    return memory_session_key(agent_id=None, agent="", session_id=session_id)


def _memory(session_id):
    return get_tracker().snapshot(_memory_key(session_id))


def _lookup(query, session_id, **kwargs):
    return lookup_knowledge(query=query, session_id=session_id, **kwargs)


def _doc_keys(body):
    return [item["docKey"] for item in ([body["primary"]] if body["primary"] else []) + body["supplement"]]


def _all_keys(value):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from _all_keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _all_keys(inner)


# --- FS-2 on real similarities -------------------------------------------------------------------
def test_a_close_paraphrase_is_highly_relevant(seeded_corpus, session_id):
    outcome = _lookup("数据库连接池配置", session_id)
    assert outcome.body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert outcome.body["primary"]["docKey"] == "infrastructure/mysql-pool.md"
    assert outcome.details["l1_top_similarity"] >= 0.75
    assert outcome.details["l0_match_count"] == 0


def test_a_unique_keyword_is_precise_even_with_a_low_similarity(seeded_corpus, session_id):
    outcome = _lookup("ERR_TIMEOUT", session_id)
    assert outcome.body["relevanceLevel"] == "PRECISE"
    assert outcome.details["l0_match_count"] == 1
    assert outcome.details["l1_top_similarity"] < 0.5
    assert outcome.body["primary"]["docKey"] == "api/error-codes.md"


def test_a_middling_similarity_is_reference(seeded_corpus, session_id):
    outcome = _lookup("故障排查", session_id)
    assert outcome.body["relevanceLevel"] == "REFERENCE"
    assert 0.5 <= outcome.details["l1_top_similarity"] < 0.75


def test_l1_hits_under_the_reference_threshold_are_never_returned(seeded_corpus, session_id):
    outcome = _lookup("今天天气怎么样", session_id)
    assert outcome.body["found"] is False
    assert outcome.body["primary"] is None and outcome.body["supplement"] == []
    assert outcome.body["relevanceLevel"] is None and outcome.body["completenessHint"] is None
    # There were L1 candidates, all under 0.5: recorded, not returned.
    assert outcome.details["l1_candidates"]
    assert all(c["similarity"] < 0.5 for c in outcome.details["l1_candidates"])
    assert outcome.body["retrievedDomainsThisSession"] == []


def test_several_l0_matches_without_l1_support_are_reference(seeded_corpus, session_id):
    # Two documents' keywords in one query, and nothing close in meaning.
    outcome = _lookup("maxmemory 和 minimumIdle", session_id)
    assert outcome.details["l0_match_count"] == 2
    assert outcome.details["l1_top_similarity"] < 0.75
    assert outcome.body["relevanceLevel"] == "REFERENCE"
    assert sorted(_doc_keys(outcome.body)) == [
        "infrastructure/mysql-pool.md",
        "infrastructure/redis-cache.md",
    ]


def test_several_l0_matches_with_a_close_l1_hit_are_highly_relevant(corpus, session_id):
    corpus.add(
        "a.md", title="数据库连接池配置", domain="infra", keywords=["连接池"], chunks=["数据库连接池配置"]
    )
    corpus.add("b.md", title="线程池", domain="infra", keywords=["连接池"], chunks=["线程池的大小设置"])
    outcome = _lookup("数据库连接池怎么配置", session_id)
    assert outcome.details["l0_match_count"] == 2
    assert outcome.body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert outcome.body["primary"]["docKey"] == "a.md"
    assert _doc_keys(outcome.body) == ["a.md", "b.md"]


def test_the_precise_document_is_primary_and_close_l1_hits_follow_as_supplement(corpus, session_id):
    corpus.add("codes.md", title="错误码", domain="api", keywords=["ERR_TIMEOUT"], chunks=["错误码列表"])
    corpus.add("timeout.md", title="超时", domain="api", chunks=["ERR_TIMEOUT"])
    outcome = _lookup("ERR_TIMEOUT", session_id)
    assert outcome.body["relevanceLevel"] == "PRECISE"
    assert _doc_keys(outcome.body) == ["codes.md", "timeout.md"]


def test_supplement_holds_at_most_max_supplement_distinct_documents(corpus, session_id, settings):
    for i in range(6):
        corpus.add(
            f"pool{i}.md",
            title=f"文档{i}",
            domain="infra",
            chunks=["数据库连接池配置", "数据库连接池配置说明"],
        )
    settings.RETRIEVAL_MAX_SUPPLEMENT = 3
    outcome = _lookup("数据库连接池配置", session_id)
    keys = _doc_keys(outcome.body)
    assert len(keys) == 4 and len(set(keys)) == 4
    assert len(outcome.body["supplement"]) == 3


# --- FS-4: what the agent reads ----------------------------------------------------------------------
def test_fs4_a_normal_result_carries_level_hint_and_domains(seeded_corpus, session_id):
    body = _lookup("数据库连接池配置", session_id).body
    assert set(body) == {
        "found",
        "primary",
        "supplement",
        "relevanceLevel",
        "completenessHint",
        "retrievedDomainsThisSession",
        "message",
    }
    assert body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert body["completenessHint"] == "当前结果已高度相关，继续检索不太可能找到更精准的文档"
    assert body["retrievedDomainsThisSession"] == ["infrastructure"]


def test_fs4_a_doc_level_dedup_says_so_and_still_lists_the_domains(seeded_corpus, session_id):
    _lookup("数据库连接池配置", session_id)
    body = _lookup("数据库连接池怎么配置", session_id).body
    assert body["found"] is False
    assert body["relevanceLevel"] == "DEDUPED"
    assert "本会话均已获取" in body["message"] and "MySQL 连接池配置说明" in body["message"]
    assert body["retrievedDomainsThisSession"] == ["infrastructure"]


def test_fs4_results_carry_no_score_fields(seeded_corpus, session_id):
    body = _lookup("maxmemory 和 minimumIdle", session_id).body
    assert body["primary"] and body["supplement"]
    for item in [body["primary"], *body["supplement"]]:
        assert set(item) == {"title", "domain", "docKey", "headingPath", "content"}
    assert not [k for k in _all_keys(body) if any(w in k.lower() for w in SCORE_WORDS)]


def test_the_primary_carries_its_document_and_the_matched_section(seeded_corpus, session_id):
    primary = _lookup("ERR_TIMEOUT", session_id).body["primary"]
    # The chunk holding the keyword names the section.
    assert primary["headingPath"] == "网关错误码说明 > 超时"
    document = ApiDocument.objects.get(doc_key="api/error-codes.md")
    assert primary["content"] == document.content
    assert primary["title"] == "网关错误码说明" and primary["domain"] == "api"


def test_a_primary_too_long_to_send_whole_carries_the_chunks_around_the_match(corpus, session_id, settings):
    settings.RETRIEVAL_CONTENT_MAX_CHARS = 120
    chunks = [(f"第{i}节", f"第{i}节的内容。" + "填充文字" * 8) for i in range(8)]
    chunks[5] = ("超时", "ERR_TIMEOUT 表示上游服务没有在规定时间内响应。")
    corpus.add("long.md", title="长文档", domain="api", keywords=["ERR_TIMEOUT"], chunks=chunks)
    primary = _lookup("ERR_TIMEOUT", session_id).body["primary"]
    assert primary["headingPath"] == "长文档 > 超时"
    assert "ERR_TIMEOUT 表示上游服务" in primary["content"]
    assert len(primary["content"]) <= 120
    assert "第0节" not in primary["content"]


# --- action memory in the lookup (FS-3, seed 004 Part A) ------------------------------------------
def test_only_what_is_returned_is_marked(seeded_corpus, session_id):
    outcome = _lookup("数据库连接池配置", session_id)
    assert _memory(session_id).domains == {"infrastructure": ["infrastructure/mysql-pool.md"]}
    # Candidates under the threshold (the exhaustion doc, hikaricp) were not marked.
    assert {c["doc_key"] for c in outcome.details["l1_candidates"]} > {"infrastructure/mysql-pool.md"}


def test_withheld_documents_make_room_for_the_next_ones(corpus, session_id):
    for i in range(3):
        corpus.add(f"p{i}.md", title=f"文档{i}", domain="infra", chunks=["数据库连接池配置"])
    first = _lookup("数据库连接池配置", session_id)
    assert len(_doc_keys(first.body)) == 3
    corpus.add("p3.md", title="文档3", domain="infra", chunks=["数据库连接池配置"])
    second = _lookup("数据库连接池配置", session_id)
    assert _doc_keys(second.body) == ["p3.md"]
    assert second.details["dedup_reason"] == "doc_retrieved"
    assert sorted(second.details["withheld_doc_keys"]) == ["p0.md", "p1.md", "p2.md"]
    assert "已省略本会话已获取的文档" in second.body["message"]
    assert second.body["relevanceLevel"] == "HIGHLY_RELEVANT"


def test_a_withheld_precise_document_leaves_the_level_to_what_is_returned(corpus, session_id):
    corpus.add("codes.md", title="错误码", domain="api", keywords=["ERR_TIMEOUT"], chunks=["错误码列表"])
    corpus.add("timeout.md", title="超时", domain="api", chunks=["ERR_TIMEOUT"])
    get_tracker().mark_retrieved(_memory_key(session_id), "api", "codes.md")
    outcome = _lookup("ERR_TIMEOUT", session_id)
    assert _doc_keys(outcome.body) == ["timeout.md"]
    assert outcome.body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert outcome.details["dedup_reason"] == "doc_retrieved"


def test_sessions_do_not_share_memory(seeded_corpus, session_id):
    _lookup("数据库连接池配置", session_id)
    other = _lookup("数据库连接池配置", session_id + "-other")
    assert other.body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert other.body["retrievedDomainsThisSession"] == ["infrastructure"]


def test_soft_domain_dedup_returns_results_and_points_at_the_domain(seeded_corpus, session_id, settings):
    settings.RETRIEVAL_DOMAIN_DEDUP = "soft"
    _lookup("数据库连接池配置", session_id)
    outcome = _lookup("HikariCP 参数", session_id)
    assert outcome.body["relevanceLevel"] == "PRECISE"
    assert outcome.body["primary"]["docKey"] == "infrastructure/hikaricp.md"
    assert "域「infrastructure」本会话此前已检索过" in outcome.body["message"]
    assert outcome.details["dedup_reason"] is None


def test_hard_domain_dedup_blocks_a_lookup_whose_best_result_is_in_a_retrieved_domain(
    seeded_corpus, session_id, settings
):
    settings.RETRIEVAL_DOMAIN_DEDUP = "hard"
    _lookup("数据库连接池配置", session_id)
    outcome = _lookup("HikariCP 参数", session_id)
    assert outcome.body["found"] is False
    assert outcome.body["relevanceLevel"] == "DEDUPED"
    assert outcome.details["dedup_reason"] == "domain_retrieved"
    # The message names the domain and what the session already holds there.
    assert "域「infrastructure」" in outcome.body["message"]
    assert "infrastructure/mysql-pool.md" in outcome.body["message"]
    assert outcome.body["retrievedDomainsThisSession"] == ["infrastructure"]
    # Blocked: nothing new marked. Another domain still answers.
    assert _memory(session_id).doc_keys == {"infrastructure/mysql-pool.md"}
    assert _lookup("ERR_TIMEOUT", session_id).body["relevanceLevel"] == "PRECISE"


def test_domain_dedup_off_adds_no_domain_note(seeded_corpus, session_id, settings):
    settings.RETRIEVAL_DOMAIN_DEDUP = "off"
    _lookup("数据库连接池配置", session_id)
    outcome = _lookup("HikariCP 参数", session_id)
    assert outcome.body["found"] is True
    assert "此前已检索过" not in outcome.body["message"]
    assert outcome.body["retrievedDomainsThisSession"] == ["infrastructure"]


# --- dry runs (hit testing) -------------------------------------------------------------------------
def test_a_dry_run_neither_marks_the_session_nor_records(seeded_corpus, session_id):
    before = ToolInvocation.objects.count()
    outcome = _lookup("数据库连接池配置", session_id, dry_run=True)
    assert outcome.invocation_id is None
    assert outcome.body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert outcome.body["retrievedDomainsThisSession"] == ["infrastructure"]  # as the call would leave it
    assert _memory(session_id).domains == {}
    assert ToolInvocation.objects.count() == before
    candidate = outcome.details["l1_candidates"][0]
    assert set(candidate) >= {"doc_key", "domain", "chunk_id", "chunk_index", "score", "similarity", "title"}
    assert candidate["doc_key"] == "infrastructure/mysql-pool.md"
    # The same call for real now gives the same answer.
    assert _lookup("数据库连接池配置", session_id).body == outcome.body


def test_a_dry_run_refuses_bad_input_without_recording(db):
    with pytest.raises(ValidationError) as excinfo:
        _lookup("", "s", dry_run=True)
    assert "query" in excinfo.value.message_dict
    assert ToolInvocation.objects.count() == 0


# --- the database is the truth; parts may be down ----------------------------------------------------
def test_vectors_of_a_document_no_longer_indexed_are_ignored(seeded_corpus, session_id):
    ApiDocument.objects.filter(doc_key="infrastructure/mysql-pool.md").delete()  # Milvus rows remain
    outcome = _lookup("数据库连接池配置", session_id)
    assert outcome.body["found"] is False
    assert outcome.details["l1_top_similarity"] is None or outcome.details["l1_top_similarity"] < 0.5
    stale = [c for c in outcome.details["l1_candidates"] if c["doc_key"] == "infrastructure/mysql-pool.md"]
    assert stale and not any(c["indexed"] for c in stale)


def test_with_milvus_down_the_lookup_answers_from_keywords_as_degraded(seeded_corpus, session_id, settings):
    settings.MILVUS_URI = f"http://127.0.0.1:{free_port()}"
    settings.MILVUS_TIMEOUT = 2
    reset_vector_store()
    outcome = _lookup("ERR_TIMEOUT", session_id)
    assert outcome.status == "DEGRADED"
    assert outcome.body["relevanceLevel"] == "PRECISE"
    assert "部分检索暂不可用" in outcome.body["message"]
    record = ToolInvocation.objects.get(pk=outcome.invocation_id)
    assert record.status == "DEGRADED" and "vector search unavailable" in record.error
    assert _lookup("数据库连接池配置", session_id).body["found"] is False


def test_with_the_action_memory_down_the_lookup_still_answers_as_degraded(
    seeded_corpus, session_id, settings
):
    settings.RETRIEVAL_TRACKER_BACKEND = "redis"
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    outcome = _lookup("数据库连接池配置", session_id)
    assert outcome.status == "DEGRADED"
    assert outcome.body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert any("action memory unavailable" in d for d in outcome.details["degraded"])


def test_an_empty_knowledge_base_finds_nothing(vector_store, session_id):
    outcome = _lookup("数据库连接池配置", session_id)
    assert outcome.status == "SUCCESS"
    assert outcome.body["found"] is False and outcome.body["retrievedDomainsThisSession"] == []
