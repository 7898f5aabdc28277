"""FS-5: the executor prompt's retrieval constraints, one test per acceptance criterion."""

import pytest

from knowledge.models import KnowledgeDomain
from retrieval.selectors import executor_prompt_get


@pytest.fixture
def prompt(db):
    # Domains exist, with planner guidance: none of it may reach the executor.
    KnowledgeDomain.objects.create(
        domain_id="payment", description="支付链路问题排查", when_to_retrieve="用户问题涉及支付、退款时检索"
    )
    return executor_prompt_get()


def test_fs5_no_knowledge_map_content(prompt):
    for marker in ("available_knowledge_domains", "knowledge map", "知识域地图", "when_to_retrieve"):
        assert marker not in prompt.lower()
    assert "payment" not in prompt and "支付链路问题排查" not in prompt


def test_fs5_forbids_retrying_with_other_keywords(prompt):
    assert "禁止换关键词重新检索" in prompt


def test_fs5_offers_the_legal_exit(prompt):
    assert "不查全不会被追责，重复检索才会被惩罚" in prompt


def test_fs5_guides_each_relevance_level(prompt):
    for level in ("PRECISE", "HIGHLY_RELEVANT", "REFERENCE", "DEDUPED"):
        line = next(line for line in prompt.splitlines() if f"`{level}`" in line and line.startswith("|"))
        # Each row says what to do, not only what the level means.
        assert len(line.split("|")) >= 4 and line.split("|")[3].strip()
    assert "retrievedDomainsThisSession" in prompt and "completenessHint" in prompt


def test_fs5_the_must_always_call_rule_is_replaced(prompt):
    assert "所有需要外部信息的地方，都必须调用对应的工具" not in prompt
    assert "需要外部信息时调用工具，但须遵守下方的检索约束" in prompt


def test_fs5_has_the_four_constraints(prompt):
    for title in ("约束 1：判断重复", "约束 2：重复了怎么办", "约束 3：合法出口", "约束 4：利用质量信号"):
        assert title in prompt
