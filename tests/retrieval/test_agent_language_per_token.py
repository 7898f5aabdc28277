"""Per-token agent-facing language (issue 15 item 2): an agent's AgentProfile.language overrides
AGENT_LANGUAGE for everything its token reads, over REST and over MCP (streamable HTTP).

The REST calls go through DRF's test client, the MCP ones through tests/retrieval/
test_mcp_server.py's LiveAsgi (uvicorn serving config.asgi on a free port).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from django.contrib.auth import get_user_model
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rest_framework.test import APIClient

from retrieval.agents.language import agent_language
from retrieval.agents.tokens import tool_token_issue
from retrieval.models import AgentProfile
from tests.retrieval.conftest import CJK, english_documents
from tests.retrieval.test_mcp_server import LiveAsgi


def _client(language: str | None):
    """A tool token whose agent has a profile asking for ``language`` (None: no profile at all)."""
    token = tool_token_issue(name=f"agent-{ {'': 'default', None: 'none'}.get(language, language) }")
    if language is not None:
        AgentProfile.objects.update_or_create(user=token.user, defaults={"language": language})
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client, token


def _fresh_user(token):
    return get_user_model().objects.get(pk=token.user_id)


def _rest_texts(client) -> dict[str, str]:
    lookup = client.post(
        "/api/tools/lookup_knowledge",
        {"query": "ERR_TIMEOUT", "session_id": f"per-token-{uuid.uuid4().hex}"},
        format="json",
    ).json()
    return {
        "message": lookup["message"],
        "hint": lookup["completenessHint"],
        "tool": client.get("/api/tools/lookup_knowledge/schema").json()["function"]["description"],
        "executor": client.get("/api/prompts/executor").content.decode(),
        "planner": client.get("/api/prompts/planner", {"format": "json"}).json()["content"],
    }


@pytest.mark.django_db
def test_agent_language_reads_the_profile_and_falls_back_to_the_setting(settings):
    settings.AGENT_LANGUAGE = "zh"
    # Fresh user rows, as each request loads them (a token's user may hold a cached profile).
    english, default, none = (_fresh_user(_client(language)[1]) for language in ("en", "", None))
    assert agent_language(english) == "en"
    assert agent_language(english.get_username()) == "en"
    assert agent_language(default) == agent_language(none) == "zh"
    settings.AGENT_LANGUAGE = "en"
    assert agent_language(default) == agent_language(none) == "en"


@pytest.mark.django_db
def test_over_rest_each_token_reads_its_own_language(corpus, settings):
    settings.AGENT_LANGUAGE = "zh"
    english_documents(corpus)
    english = _rest_texts(_client("en")[0])
    chinese = _rest_texts(_client(None)[0])
    for name, text in english.items():
        assert not CJK.search(text), (name, text)
    assert english["executor"].startswith("# The Executor role")
    assert english["hint"] == settings.COMPLETENESS_HINTS["en"]["PRECISE"]
    assert all(CJK.search(text) for text in chinese.values()), chinese
    assert chinese["hint"] == settings.COMPLETENESS_HINTS["zh"]["PRECISE"]


@pytest.mark.django_db
def test_a_chinese_profile_under_an_english_setting_reads_chinese(corpus, settings):
    settings.AGENT_LANGUAGE = "en"
    english_documents(corpus)
    texts = _rest_texts(_client("zh")[0])
    assert texts["executor"].startswith("# Executor 角色说明")
    assert texts["message"].startswith("找到 1 篇文档")


@pytest.mark.django_db(transaction=True)
def test_over_mcp_http_lookups_and_prompts_follow_the_tokens_profile(corpus, settings):
    settings.AGENT_LANGUAGE = "zh"
    english_documents(corpus)
    _, token = _client("en")

    async def run(server):
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {token.key}"}, timeout=30) as http,
            streamable_http_client(server.mcp_url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            lookup = await session.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT"})
            executor = await session.get_prompt("executor")
            planner = await session.get_prompt("planner")
            return json.loads(lookup.content[0].text), executor, planner

    with LiveAsgi() as server:
        body, executor, planner = asyncio.run(run(server))
    assert body["relevanceLevel"] == "PRECISE" and not CJK.search(body["message"] + body["completenessHint"])
    assert executor.messages[0].content.text.startswith("# The Executor role")
    assert planner.messages[0].content.text.startswith("# Role: the Planner")
