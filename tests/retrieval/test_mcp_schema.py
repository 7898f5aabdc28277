"""MCP parity: the MCP lookup_knowledge tool advertises the REST tool's limits and descriptions,
and a call past those limits is refused by the lookup service, naming the field and recorded,
exactly as over REST."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue
from retrieval.entrypoints.mcp_server import build_server
from retrieval.selectors import lookup_tool_definition
from tests.retrieval.test_mcp_server import LiveAsgi

LIMIT_KEYS = ("type", "minLength", "maxLength", "minimum", "maximum")


def _rest_properties() -> dict[str, dict]:
    return lookup_tool_definition()["function"]["parameters"]["properties"]


def _assert_parity(mcp_schema: dict) -> None:
    rest = _rest_properties()
    mcp = mcp_schema["properties"]
    # No session_id for the model to fill: the MCP session is the session (the tool still takes it).
    assert set(mcp) == set(rest) == {"query", "domains", "metadata_condition", "top_k"}
    for name, rest_property in rest.items():
        assert {k: mcp[name].get(k) for k in LIMIT_KEYS} == {k: rest_property.get(k) for k in LIMIT_KEYS}, (
            name
        )
        assert mcp[name]["description"].startswith(rest_property["description"]), name
    # Over MCP only the query is required: the MCP session is the default session.
    assert mcp_schema["required"] == ["query"]


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_advertised_schema_carries_the_rest_limits_and_descriptions(settings, language):
    settings.AGENT_LANGUAGE = language
    settings.RETRIEVAL_MAX_QUERY_CHARS = 500  # read when the server is built, as REST reads it per call
    tools = {t.name: t for t in asyncio.run(build_server().list_tools())}
    schema = tools["lookup_knowledge"].inputSchema
    _assert_parity(schema)
    assert schema["properties"]["query"]["maxLength"] == 500
    assert (schema["properties"]["top_k"]["minimum"], schema["properties"]["top_k"]["maximum"]) == (1, 100)
    assert "session_id" not in schema["properties"]


@pytest.mark.django_db(transaction=True)
def test_over_http_calls_past_the_limits_are_refused_by_the_service_and_recorded(corpus, settings):
    token = tool_token_issue(name=f"mcp-limits-{uuid.uuid4().hex[:6]}")
    limit = settings.RETRIEVAL_MAX_QUERY_CHARS

    async def run():
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {token.key}"}, timeout=30) as http,
            streamable_http_client(server.mcp_url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            results = [
                await session.call_tool("lookup_knowledge", arguments)
                for arguments in (
                    {"query": "x" * (limit + 1)},
                    {"query": "ERR_TIMEOUT", "top_k": 0},
                    {"query": "ERR_TIMEOUT", "session_id": "s" * 129},
                )
            ]
            return tools, results

    with LiveAsgi() as server:
        tools, results = asyncio.run(run())
    _assert_parity(json.loads(json.dumps(tools["lookup_knowledge"].inputSchema)))
    messages = [r.content[0].text for r in results]
    assert all(r.isError for r in results)
    assert f"query: Ensure this field has no more than {limit} characters" in messages[0]
    assert "top_k: Ensure this value is between 1 and 100." in messages[1]
    assert "session_id: Ensure this field has no more than 128 characters." in messages[2]
    recorded = ToolInvocation.objects.filter(tool_name="lookup_knowledge").order_by("id")
    assert [i.status for i in recorded] == ["ERROR"] * 3
    assert all(i.request["source"] == "mcp" for i in recorded)
