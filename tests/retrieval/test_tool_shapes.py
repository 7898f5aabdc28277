"""GET /api/tools/lookup_knowledge/schema in the OpenAI API's tool shapes, each checked against
the ``openai`` SDK's own types: Chat Completions (default), the Responses API's flat function tool
(``?format=responses``) and strict mode (``?strict=true``), which the SDK's own strict-schema
rules leave unchanged and its ``parse()`` accepts."""

from __future__ import annotations

import copy
import json
import uuid

import pytest
from openai import OpenAI
from openai.lib._parsing._completions import validate_input_tools
from openai.lib._pydantic import _ensure_strict_json_schema
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam, ToolParam
from pydantic import ConfigDict, TypeAdapter, with_config

from retrieval.entrypoints.tool_shapes import STRICT_KEYWORDS
from tests.support.fake_openai import Reply, tool_call

URL = "/api/tools/lookup_knowledge/schema"
pytestmark = pytest.mark.django_db


def _forbidding_extra(typed_dict):
    """The SDK's TypedDict, refusing keys it does not define (pydantic ignores them by default)."""
    return TypeAdapter(with_config(ConfigDict(extra="forbid"))(typed_dict))


def _get(agent_client, query: str = "") -> dict:
    response = agent_client.get(URL + query)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return response.json()


def _keywords(schema: dict) -> set[str]:
    found = set(schema)
    for sub in schema.get("properties", {}).values():
        found |= _keywords(sub)
    return found


def test_the_default_shape_is_a_chat_completions_tool(agent_client):
    tool = _get(agent_client)
    _forbidding_extra(ChatCompletionFunctionToolParam).validate_python(tool)
    assert tool["function"]["parameters"]["properties"]["query"]["maxLength"] >= 1
    assert _get(agent_client, "?format=chat") == tool


def test_format_responses_is_the_responses_apis_flat_function_tool(agent_client):
    chat = _get(agent_client)["function"]
    tool = _get(agent_client, "?format=responses")
    _forbidding_extra(FunctionToolParam).validate_python(tool)
    TypeAdapter(ToolParam).validate_python(tool)  # one of the Responses API's tools
    assert tool == {
        "type": "function",
        "name": "lookup_knowledge",
        "description": chat["description"],
        "parameters": chat["parameters"],
        "strict": False,
    }


@pytest.mark.parametrize("shape", ["chat", "responses"])
def test_strict_mode_requires_every_property_and_keeps_only_supported_keywords(agent_client, shape):
    tool = _get(agent_client, f"?format={shape}&strict=true")
    if shape == "chat":
        _forbidding_extra(ChatCompletionFunctionToolParam).validate_python(tool)
        validate_input_tools([tool])  # the SDK's own check before parse(): the tool must be strict
        function = tool["function"]
    else:
        _forbidding_extra(FunctionToolParam).validate_python(tool)
        function = tool
    parameters = function["parameters"]
    assert function["strict"] is True
    assert (
        parameters["required"]
        == list(parameters["properties"])
        == ["query", "domains", "metadata_condition", "top_k"]
    )
    assert parameters["additionalProperties"] is False
    assert _keywords(parameters) <= STRICT_KEYWORDS | {"query", "domains", "top_k"}
    # The SDK's strict-schema rules (what pydantic_function_tool applies) change nothing.
    assert _ensure_strict_json_schema(copy.deepcopy(parameters), path=(), root={}) == parameters
    # The limits strict mode cannot express are in the descriptions; optional top_k is nullable.
    properties = parameters["properties"]
    assert properties["top_k"]["type"] == ["integer", "null"]
    assert properties["metadata_condition"]["type"] == ["object", "null"]
    assert (
        "(1 to 100)" in properties["top_k"]["description"]
        or "（1 到 100）" in properties["top_k"]["description"]
    )


def test_the_sdk_sends_the_strict_tool_and_parses_the_models_call(agent_client, fake_openai):
    tool = _get(agent_client, "?strict=true")
    fake_openai.push(
        Reply(
            tool_calls=[
                tool_call(
                    "lookup_knowledge",
                    {"query": "ERR_TIMEOUT", "domains": None, "metadata_condition": None, "top_k": None},
                )
            ]
        )
    )
    client = OpenAI(base_url=fake_openai.base_url, api_key="test-key")
    completion = client.chat.completions.parse(
        model="fake-model", messages=[{"role": "user", "content": "ERR_TIMEOUT?"}], tools=[tool]
    )
    call = completion.choices[0].message.tool_calls[0]
    assert call.function.parsed_arguments == {
        "query": "ERR_TIMEOUT",
        "domains": None,
        "metadata_condition": None,
        "top_k": None,
    }
    assert fake_openai.chat_requests()[-1].body["tools"] == [json.loads(json.dumps(tool))]


def test_a_strict_call_with_top_k_null_is_a_lookup_with_the_default(agent_client, seeded_corpus):
    response = agent_client.post(
        "/api/tools/lookup_knowledge",
        {"query": "ERR_TIMEOUT", "domains": None, "metadata_condition": None, "top_k": None},
        HTTP_X_SESSION_ID=f"strict-{uuid.uuid4().hex}",  # Redis outlives a run: a session of its own
        format="json",
    )
    assert response.status_code == 200 and response.json()["relevanceLevel"] == "PRECISE"


@pytest.mark.parametrize(("query", "field"), [("?format=xml", "format"), ("?strict=maybe", "strict")])
def test_an_unknown_shape_is_a_400_naming_the_parameter(agent_client, query, field):
    response = agent_client.get(URL + query)
    assert response.status_code == 400
    assert field in json.dumps(response.json())


def test_english_agents_get_english_strict_descriptions(agent_client, settings):
    settings.AGENT_LANGUAGE = "en"
    properties = _get(agent_client, "?strict=true")["function"]["parameters"]["properties"]
    assert properties["query"]["description"].endswith(
        f"(1 to {settings.RETRIEVAL_MAX_QUERY_CHARS} characters)"
    )
    assert properties["top_k"]["description"].endswith("(1 to 100) Null for the default.")
