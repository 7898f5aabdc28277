"""AGENT_LANGUAGE: the seeds' Chinese by default, English on request, for everything agents read
(messages, completeness hints, the tool description, the executor and planner prompts, the MCP
server's tool and prompt descriptions), and ``agent_language(user)`` for a per-agent choice."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from django.core.exceptions import ObjectDoesNotExist

from knowledge.models import KnowledgeDomain
from knowledge.vectorstore import reset_vector_store
from retrieval.agents.language import agent_language
from retrieval.entrypoints.mcp_server import build_server
from retrieval.selectors import executor_prompt_get, lookup_tool_definition, planner_prompt_render
from retrieval.services import lookup_knowledge
from tests.conftest import REPO, free_port
from tests.retrieval.conftest import CJK

PRINT_SETTINGS = (
    "import django; django.setup(); from django.conf import settings as s; print(s.AGENT_LANGUAGE); "
    "print(s.RETRIEVAL_HINT_PRECISE); print(s.RETRIEVAL_HINT_HIGHLY_RELEVANT); print(s.RETRIEVAL_HINT_REFERENCE)"
)


def _settings(**env) -> subprocess.CompletedProcess:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith("RETRIEVAL_HINT") and k != "AGENT_LANGUAGE"
    }
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- the setting -----------------------------------------------------------------------------------
def test_by_default_agents_get_the_seeds_chinese():
    result = _settings()
    assert result.returncode == 0, result.stderr
    language, precise, _, _ = result.stdout.splitlines()
    assert (language, precise) == ("zh", "知识库中不存在比上述结果更精准的文档")


def test_english_on_request_and_an_explicit_hint_still_wins():
    result = _settings(AGENT_LANGUAGE="en", RETRIEVAL_HINT_REFERENCE="Custom reference hint")
    assert result.returncode == 0, result.stderr
    language, precise, highly, reference = result.stdout.splitlines()
    assert language == "en"
    assert precise == "The knowledge base holds no document more precise than the results above."
    assert highly.startswith("These results are highly relevant")
    assert reference == "Custom reference hint"


def test_the_former_name_retrieval_hint_language_still_works():
    result = _settings(RETRIEVAL_HINT_LANGUAGE="en")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "en"
    assert _settings(RETRIEVAL_HINT_LANGUAGE="zh-hans").stdout.splitlines()[0] == "zh"


def test_an_unknown_language_stops_start_up_naming_the_variable():
    result = _settings(AGENT_LANGUAGE="fr")
    assert result.returncode != 0
    assert "AGENT_LANGUAGE must be one of zh, en; got 'fr'" in result.stderr


# --- agent_language(user) ------------------------------------------------------------------------------
class _NoProfile:
    """A user whose one-to-one accessor has no row (what Django raises)."""

    @property
    def agent_profile(self):
        raise ObjectDoesNotExist("no profile")


@pytest.mark.parametrize(
    ("user", "global_language", "expected"),
    [
        (None, "zh", "zh"),
        (None, "en", "en"),
        (SimpleNamespace(), "en", "en"),  # a user model without the relation
        (_NoProfile(), "zh", "zh"),
        (SimpleNamespace(agent_profile=None), "zh", "zh"),
        (SimpleNamespace(agent_profile=SimpleNamespace(language="")), "en", "en"),  # profile: default
        (SimpleNamespace(agent_profile=SimpleNamespace(language="en")), "zh", "en"),
        (SimpleNamespace(agent_profile=SimpleNamespace(language="zh")), "en", "zh"),
        (SimpleNamespace(agent_profile=SimpleNamespace(language="fr")), "zh", "zh"),  # not ours: ignored
    ],
)
def test_the_profile_language_wins_over_the_global_setting(settings, user, global_language, expected):
    settings.AGENT_LANGUAGE = global_language
    assert agent_language(user) == expected


@pytest.mark.django_db
def test_a_username_without_a_user_gets_the_global_language(settings):
    settings.AGENT_LANGUAGE = "en"
    assert agent_language("nobody-of-that-name") == "en"


# --- what English-speaking agents read -------------------------------------------------------------
@pytest.fixture
def english(settings):
    settings.AGENT_LANGUAGE = "en"
    return settings


def _strings(value) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.django_db
def test_english_lookups_carry_no_chinese(english, english_corpus, session_id):
    found = lookup_knowledge(query="database connection pool configuration", session_id=session_id)
    assert found.body["found"] is True
    assert re.fullmatch(
        r'Found \d document\(s\); primary result "Database connection pool settings" \(domain: ops\)'
        r"(, plus \d supplement\(s\))?\.",
        found.body["message"],
    ), found.body["message"]
    assert found.body["completenessHint"] == english.COMPLETENESS_HINTS["en"][found.body["relevanceLevel"]]
    keyword = lookup_knowledge(query="ERR_TIMEOUT", session_id=session_id)
    assert keyword.body["relevanceLevel"] == "PRECISE"
    again = lookup_knowledge(query="database connection pool configuration", session_id=session_id)
    assert again.body["relevanceLevel"] == "DEDUPED"
    assert again.body["message"].startswith("Every document related to this query was already fetched")
    nothing = lookup_knowledge(query="quarterly marketing budget for snacks", session_id=session_id)
    for outcome in (found, keyword, again, nothing):
        assert not [s for s in _strings(outcome.body) if CJK.search(s)], outcome.body
        assert outcome.details["agent_language"] == "en"


@pytest.mark.django_db
def test_a_hard_domain_block_and_a_vector_outage_are_explained_in_english(
    english, english_corpus, session_id, settings
):
    settings.RETRIEVAL_DOMAIN_DEDUP = "hard"
    settings.RETRIEVAL_MAX_SUPPLEMENT = 0  # the first lookup hands over its primary only
    lookup_knowledge(query="database connection pool configuration", session_id=session_id)
    blocked = lookup_knowledge(query="connection pool exhausted", session_id=session_id)
    assert blocked.body["message"].startswith("This session already retrieved the domain 'ops'")
    assert not CJK.search(blocked.body["message"])

    settings.MILVUS_URI = f"http://127.0.0.1:{free_port()}"
    settings.MILVUS_TIMEOUT = 2
    reset_vector_store()
    try:
        degraded = lookup_knowledge(query="ERR_TIMEOUT", session_id=f"{session_id}-2")
    finally:
        reset_vector_store()
    assert degraded.status == "DEGRADED"
    assert degraded.body["message"].endswith(
        "(Part of the search is unavailable: semantic search (the vector store) is down, so these "
        "results come from keyword matching only and may be incomplete.)"
    )
    assert not CJK.search(degraded.body["message"])


@pytest.mark.django_db
def test_the_tool_description_and_prompts_in_english(english):
    KnowledgeDomain.objects.create(
        domain_id="ops", description="Operations", when_to_retrieve="Ops questions"
    )
    definition = lookup_tool_definition()
    assert definition["function"]["description"].startswith("Look up documents in the knowledge base")
    assert not [s for s in _strings(definition) if CJK.search(s)]
    assert not CJK.search(executor_prompt_get())
    assert not CJK.search(planner_prompt_render())
    # The language can also be asked for explicitly, whatever the global setting.
    assert lookup_tool_definition("zh")["function"]["description"].startswith("在知识库中检索文档")
    assert "## 检索约束" in executor_prompt_get("zh")


@pytest.mark.django_db
def test_the_mcp_server_describes_its_tools_and_prompts_in_english(english):
    server = build_server()
    tools = asyncio.run(server.list_tools())
    prompts = asyncio.run(server.list_prompts())
    described = [server.instructions or ""]
    described += [t.description or "" for t in tools] + [p.description or "" for p in prompts]
    described += [s for t in tools for s in _strings(t.inputSchema)]
    assert len(described) >= 5 and not [s for s in described if CJK.search(s)]


def test_the_chinese_default_is_unchanged(settings):
    settings.AGENT_LANGUAGE = "zh"
    server = build_server()
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    assert tools["get_knowledge_map"].description.startswith("知识域地图")
    assert lookup_tool_definition()["function"]["description"].startswith("在知识库中检索文档")
