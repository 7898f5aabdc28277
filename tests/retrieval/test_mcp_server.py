"""The MCP server, driven by the official SDK's own client over both transports.

Streamable HTTP: ``config.asgi``'s application served by a real uvicorn in a thread of the test
process (so it sees the test database); the tool token is checked on ``/mcp``. stdio: the SDK's
``stdio_client`` starts ``python manage.py mcp_server`` as a child process; the lookup half needs a
database that process can open (MariaDB: service-backed mode).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import uuid

import httpx
import pytest
import uvicorn
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue
from tests.conftest import REPO, free_port
from tests.retrieval.conftest import seed_documents
from tests.support.mcp_http import ACCEPT, INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)


class LiveAsgi:
    """config.asgi's application under uvicorn, in a thread, on a free port."""

    def __init__(self):
        from config.asgi import application_build

        self.port = free_port()
        config = uvicorn.Config(
            application_build(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp/"


@pytest.fixture
def live_asgi():
    with LiveAsgi() as server:
        yield server


def _text(result) -> str:
    assert not result.isError, result.content
    return result.content[0].text


async def _lookup_twice(session: ClientSession, query: str) -> tuple[dict, dict]:
    first = json.loads(_text(await session.call_tool("lookup_knowledge", {"query": query})))
    second = json.loads(_text(await session.call_tool("lookup_knowledge", {"query": query})))
    return first, second


def _returned(body: dict) -> set[str]:
    docs = ([body["primary"]] if body["primary"] else []) + body["supplement"]
    return {d["docKey"] for d in docs}


# --- streamable HTTP ---------------------------------------------------------------------------------
def test_over_http_a_session_lists_tools_and_its_second_lookup_withholds_the_first_document(
    corpus, live_asgi
):
    seed_documents(corpus)
    token = tool_token_issue(name=f"mcp-agent-{uuid.uuid4().hex[:6]}")

    async def run():
        headers = {"Authorization": f"Token {token.key}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(live_asgi.mcp_url, http_client=http) as (read, write, get_session_id),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            prompts = {p.name for p in (await session.list_prompts()).prompts}
            first, second = await _lookup_twice(session, "ERR_TIMEOUT")
            knowledge_map = json.loads(_text(await session.call_tool("get_knowledge_map", {})))
            executor = await session.get_prompt("executor")
            return tools, prompts, first, second, knowledge_map, executor, get_session_id()

    tools, prompts, first, second, knowledge_map, executor, mcp_session = asyncio.run(run())

    assert set(tools) == {"lookup_knowledge", "get_knowledge_map"}
    assert set(tools["lookup_knowledge"].inputSchema["properties"]) == {
        "query",
        "domains",
        "metadata_condition",
        "top_k",
    }
    assert tools["lookup_knowledge"].inputSchema["required"] == ["query"]
    assert prompts == {"executor", "planner"}

    # Given one MCP session, the first lookup returns the document and the second withholds it.
    assert first["found"] is True and first["primary"]["docKey"] == "api/error-codes.md"
    assert "api/error-codes.md" not in _returned(second)
    assert second["relevanceLevel"] == "DEDUPED"
    assert first["sessionId"] == second["sessionId"] == f"mcp-{mcp_session}"

    # Both calls are recorded like REST lookups, under the token's agent and the MCP source.
    invocations = list(ToolInvocation.objects.filter(session_id=first["sessionId"]).order_by("id"))
    assert [i.public_id for i in invocations] == [first["invocationId"], second["invocationId"]]
    assert all(
        i.request["source"] == "mcp" and i.request["agent"] == token.user.username for i in invocations
    )

    assert {d["domain_id"] for d in knowledge_map["available_knowledge_domains"]} >= {"api", "infrastructure"}
    assert "lookup_knowledge" in executor.messages[0].content.text


def test_over_http_an_explicit_session_id_is_used_and_bad_input_names_the_field(corpus, live_asgi):
    seed_documents(corpus)
    token = tool_token_issue(name=f"mcp-agent-{uuid.uuid4().hex[:6]}")
    shared = f"shared-{uuid.uuid4().hex}"

    async def one_session(arguments: dict):
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {token.key}"}, timeout=30) as http,
            streamable_http_client(live_asgi.mcp_url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool("lookup_knowledge", arguments)

    first = json.loads(_text(asyncio.run(one_session({"query": "ERR_TIMEOUT", "session_id": shared}))))
    # A second MCP session naming the same session_id shares its action memory.
    second = json.loads(_text(asyncio.run(one_session({"query": "ERR_TIMEOUT", "session_id": shared}))))
    assert first["primary"]["docKey"] == "api/error-codes.md"
    assert second["relevanceLevel"] == "DEDUPED" and second["sessionId"] == shared

    bad = asyncio.run(one_session({"query": "   "}))
    assert bad.isError and "query: This field may not be blank." in bad.content[0].text
    invisible = asyncio.run(one_session({"query": "\u200b\ufeff\u2060"}))
    assert invisible.isError
    assert (
        "query: This field may not be blank: it holds only invisible characters." in invisible.content[0].text
    )


@pytest.mark.parametrize(
    "authorization", [None, "Token not-a-real-token", "Basic dXNlcjpwYXNz", "Token"], ids=str
)
def test_over_http_a_missing_or_invalid_token_is_refused(live_asgi, authorization):
    headers = dict(ACCEPT)
    if authorization:
        headers["Authorization"] = authorization
    response = httpx.post(live_asgi.mcp_url, json=INITIALIZE, headers=headers, timeout=10)
    assert response.status_code == 401
    assert response.json()["error"]["code"] in {"not_authenticated", "authentication_failed"}

    # The SDK client gets the refusal too, rather than a session.
    async def run():
        async with (
            httpx.AsyncClient(headers={"Authorization": "Token wrong"}, timeout=10) as http,
            streamable_http_client(live_asgi.mcp_url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 as its own error types
        asyncio.run(asyncio.wait_for(run(), timeout=15))


def test_django_is_still_served_beside_mcp(live_asgi):
    response = httpx.get(f"http://127.0.0.1:{live_asgi.port}/api/tools/lookup_knowledge/schema", timeout=10)
    assert response.status_code == 401  # Django REST framework answering, not the MCP app


# --- stdio -----------------------------------------------------------------------------------------------
def _stdio_params(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp_server"], cwd=str(REPO), env={**os.environ, **env}
    )


def test_over_stdio_tools_and_prompts_are_listed(tmp_path):
    env = {"DJANGO_SETTINGS_MODULE": "config.settings", "AGENTKB_VAR_DIR": str(tmp_path)}

    async def run():
        async with (
            stdio_client(_stdio_params(env)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            prompts = {p.name for p in (await session.list_prompts()).prompts}
            executor = await session.get_prompt("executor")
            return tools, prompts, executor

    tools, prompts, executor = asyncio.run(asyncio.wait_for(run(), timeout=60))
    assert tools == {"lookup_knowledge", "get_knowledge_map"}
    assert prompts == {"executor", "planner"}
    assert "lookup_knowledge" in executor.messages[0].content.text


@pytest.mark.services
def test_over_stdio_the_second_lookup_of_a_session_withholds_the_first_document(corpus, settings, tmp_path):
    from django.db import connection

    seed_documents(corpus)
    db_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    env = {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": db_url,
        "MILVUS_URI": settings.MILVUS_URI,
        "MILVUS_COLLECTION": settings.MILVUS_COLLECTION,
        "AGENTKB_VAR_DIR": str(tmp_path),
        "RETRIEVAL_INDEX_REFRESH_MS": "0",
    }

    async def run():
        async with (
            stdio_client(_stdio_params(env)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            return tools, *(await _lookup_twice(session, "ERR_TIMEOUT"))

    tools, first, second = asyncio.run(asyncio.wait_for(run(), timeout=120))
    assert "lookup_knowledge" in tools
    assert first["primary"]["docKey"] == "api/error-codes.md"
    assert "api/error-codes.md" not in _returned(second) and second["relevanceLevel"] == "DEDUPED"
    assert first["sessionId"] == second["sessionId"] and first["sessionId"].startswith("mcp-")
    recorded = ToolInvocation.objects.get(public_id=second["invocationId"])
    assert recorded.request["agent"] == "mcp-stdio" and recorded.request["source"] == "mcp"
