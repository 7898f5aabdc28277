"""FS-5: the executor prompt's retrieval constraints, one test per acceptance criterion, in each
agent-facing language (the seeds' Chinese and its English version)."""

import pytest

from knowledge.models import KnowledgeDomain
from retrieval.selectors import executor_prompt_get

# What each language says for each criterion.
PHRASES = {
    "zh": {
        "map_markers": ("知识域地图", "knowledge map"),
        "no_retry": "禁止换关键词重新检索",
        "legal_exit": "不查全不会被追责，重复检索才会被惩罚",
        "old_rule": "所有需要外部信息的地方，都必须调用对应的工具",
        "new_rule": "需要外部信息时调用工具，但须遵守下方的检索约束",
        "constraints": (
            "约束 1：判断重复",
            "约束 2：重复了怎么办",
            "约束 3：合法出口",
            "约束 4：利用质量信号",
        ),
        "judge_overlap": "判断这次要查的内容\n是否与已检索过的域在语义上重叠",
        "name_the_gap": "先明确指出缺少的具体维度",
    },
    "en": {
        "map_markers": ("knowledge map",),
        "no_retry": "Do not retry with other keywords",
        "legal_exit": "An incomplete search is never held against you; only repeated lookups are penalised.",
        "old_rule": "must always call",
        "new_rule": "Call a tool when you need outside information, but follow the retrieval constraints below.",
        "constraints": (
            "Constraint 1: judge repetition",
            "Constraint 2: what to do when it repeats",
            "Constraint 3: the legal exit",
            "Constraint 4: use the quality signals",
        ),
        "judge_overlap": "overlaps in meaning with a domain already looked up",
        "name_the_gap": "first name the specific aspect that is missing",
    },
}


@pytest.fixture(params=["zh", "en"])
def language(request):
    return request.param


@pytest.fixture
def prompt(db, language):
    # Domains exist, with planner guidance: none of it may reach the executor.
    KnowledgeDomain.objects.create(
        domain_id="payment", description="支付链路问题排查", when_to_retrieve="用户问题涉及支付、退款时检索"
    )
    return executor_prompt_get(language)


@pytest.fixture
def says(language):
    return PHRASES[language]


def test_fs5_no_knowledge_map_content(prompt, says):
    for marker in ("available_knowledge_domains", "when_to_retrieve", *says["map_markers"]):
        assert marker not in prompt.lower()
    assert "payment" not in prompt and "支付链路问题排查" not in prompt


def test_fs5_constraint_1_judge_repetition_against_the_session_memory(prompt, says):
    section = prompt.split(says["constraints"][0], 1)[1].split(says["constraints"][1], 1)[0]
    assert "retrievedDomainsThisSession" in section and says["judge_overlap"] in section


def test_fs5_constraint_2_forbids_retrying_with_other_keywords(prompt, says):
    section = prompt.split(says["constraints"][1], 1)[1].split(says["constraints"][2], 1)[0]
    assert says["no_retry"] in section and says["name_the_gap"] in section


def test_fs5_constraint_3_offers_the_legal_exit(prompt, says):
    section = prompt.split(says["constraints"][2], 1)[1].split(says["constraints"][3], 1)[0]
    assert says["legal_exit"] in section


def test_fs5_constraint_4_guides_each_relevance_level(prompt, says):
    section = prompt.split(says["constraints"][3], 1)[1]
    for level in ("PRECISE", "HIGHLY_RELEVANT", "REFERENCE", "DEDUPED"):
        line = next(line for line in section.splitlines() if f"`{level}`" in line and line.startswith("|"))
        # Each row says what to do, not only what the level means.
        assert len(line.split("|")) >= 4 and line.split("|")[3].strip()
    assert "retrievedDomainsThisSession" in section and "completenessHint" in section


def test_fs5_the_must_always_call_rule_is_replaced(prompt, says):
    assert says["old_rule"] not in prompt
    assert says["new_rule"] in prompt


def test_fs5_has_the_four_constraints_in_order(prompt, says):
    positions = [prompt.index(title) for title in says["constraints"]]
    assert positions == sorted(positions)
