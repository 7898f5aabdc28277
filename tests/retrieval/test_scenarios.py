"""The seeds' four scenarios (seed 000 section 7), through the HTTP API on the fixture corpus."""

import pytest

from observability.models import ToolInvocation

# FS-2..FS-4 as the seeds state them (see the seeds_rules fixture).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seeds_rules")]

HINT_PRECISE = "知识库中不存在比上述结果更精准的文档"
HINT_HIGHLY_RELEVANT = "当前结果已高度相关，继续检索不太可能找到更精准的文档"
HINT_REFERENCE = "当前结果为相关参考，如需更精准信息请明确缺少的具体维度"


@pytest.fixture
def lookup(agent_client, seeded_corpus, session_id):
    def call(query):
        response = agent_client.post(
            "/api/tools/lookup_knowledge", {"query": query, "session_id": session_id}, format="json"
        )
        assert response.status_code == 200, response.content
        return response.json()

    return call


def test_scenario_1_database_pool_configuration(lookup):
    """用户：数据库连接池怎么配置？ -> HIGHLY_RELEVANT, infrastructure; the executor answers."""
    body = lookup("数据库连接池配置")
    assert body["found"] is True
    assert body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert body["completenessHint"] == HINT_HIGHLY_RELEVANT
    assert body["retrievedDomainsThisSession"] == ["infrastructure"]
    assert body["primary"]["docKey"] == "infrastructure/mysql-pool.md"
    assert "如何配置数据库连接池" in body["primary"]["content"]


def test_scenario_2_follow_ups_in_the_same_domain(lookup, settings):
    """lookup("数据库连接池") then lookup("HikariCP 参数"): the agent sees infrastructure is done;
    a repeat of the first is withheld; with hard domain dedup the follow-up is blocked."""
    first = lookup("数据库连接池配置")
    assert first["retrievedDomainsThisSession"] == ["infrastructure"]

    follow_up = lookup("HikariCP 参数")
    assert follow_up["retrievedDomainsThisSession"] == ["infrastructure"]
    assert "域「infrastructure」本会话此前已检索过" in follow_up["message"]
    assert follow_up["primary"]["docKey"] == "infrastructure/hikaricp.md"

    repeat = lookup("数据库连接池怎么配置")
    assert repeat["found"] is False and repeat["relevanceLevel"] == "DEDUPED"
    assert repeat["retrievedDomainsThisSession"] == ["infrastructure"]
    assert "禁止换关键词重新检索" in repeat["message"]

    settings.RETRIEVAL_DOMAIN_DEDUP = "hard"
    blocked = lookup("连接池耗尽")
    assert blocked["found"] is False and blocked["relevanceLevel"] == "DEDUPED"
    assert blocked["retrievedDomainsThisSession"] == ["infrastructure"]
    assert "本次检索被拦截" in blocked["message"]
    recorded = list(ToolInvocation.objects.order_by("id").values_list("relevance_level", "dedup_reason"))
    assert recorded == [
        ("HIGHLY_RELEVANT", None),
        ("PRECISE", None),
        ("DEDUPED", "doc_retrieved"),
        ("DEDUPED", "domain_retrieved"),
    ]


def test_scenario_3_err_timeout_exact_match(lookup):
    """用户：ERR_TIMEOUT 是什么？ -> L0 matchCount=1 -> PRECISE; the executor stops."""
    body = lookup("ERR_TIMEOUT")
    assert body["relevanceLevel"] == "PRECISE"
    assert body["completenessHint"] == HINT_PRECISE
    assert body["primary"]["docKey"] == "api/error-codes.md"
    assert body["primary"]["headingPath"] == "网关错误码说明 > 超时"
    assert body["retrievedDomainsThisSession"] == ["api"]
    record = ToolInvocation.objects.latest("id")
    assert record.retrieval_details["l0_match_count"] == 1
    assert record.retrieval_details["l0_titles"] == ["网关错误码说明"]


def test_scenario_4_troubleshooting_reference_then_a_targeted_follow_up(lookup):
    """用户：如何排查生产故障？ -> REFERENCE; the executor names the missing dimension (日志分析)
    and looks that up: a new document of the same domain comes back."""
    first = lookup("故障排查")
    assert first["relevanceLevel"] == "REFERENCE"
    assert first["completenessHint"] == HINT_REFERENCE
    assert first["retrievedDomainsThisSession"] == ["troubleshooting"]
    assert first["primary"]["docKey"] == "troubleshooting/incident-process.md"

    targeted = lookup("日志分析步骤")
    assert targeted["found"] is True
    assert targeted["primary"]["docKey"] == "troubleshooting/log-analysis.md"
    assert targeted["relevanceLevel"] == "REFERENCE"
    assert targeted["retrievedDomainsThisSession"] == ["troubleshooting"]
