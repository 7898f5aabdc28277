"""The LLM client against a local OpenAI-protocol server: what it sends, what it gets back,
and how failures are sorted into "retry later" and "give up"."""

import json

import openai
import pytest

from knowledge.llm import LLMError, LLMUnavailable, get_llm_client, llm_source_name
from tests.support.fake_openai import Reply, tool_call


@pytest.fixture
def llm(settings, fake_openai):
    settings.LLM_BASE_URL = fake_openai.base_url
    settings.LLM_API_KEY = "sk-test"
    settings.LLM_MODEL = "test-model"
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT = 5
    return fake_openai


def test_no_endpoint_means_no_client_and_the_extractive_summariser(settings):
    settings.LLM_BASE_URL = ""
    assert get_llm_client() is None
    assert llm_source_name() == "extractive"


def test_chat_sends_model_messages_and_json_mode_and_returns_the_content(llm):
    llm.push({"ok": True})
    client = get_llm_client()
    text = client.chat(messages=[{"role": "user", "content": "hi"}])
    assert json.loads(text) == {"ok": True}
    request = llm.chat_requests()[0]
    assert request.body["model"] == "test-model"
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.headers["authorization"] == "Bearer sk-test"


def test_json_mode_can_be_turned_off_for_endpoints_that_reject_it(llm, settings):
    settings.LLM_JSON_MODE = False
    llm.push("plain")
    assert get_llm_client().chat(messages=[{"role": "user", "content": "hi"}]) == "plain"
    assert "response_format" not in llm.chat_requests()[0].body


def test_the_client_follows_changed_settings(llm, settings):
    first = get_llm_client()
    assert get_llm_client() is first
    settings.LLM_MODEL = "other-model"
    assert get_llm_client() is not first
    assert get_llm_client().model == "other-model"


def test_server_errors_are_retried_by_the_client_with_backoff(llm, settings):
    settings.LLM_MAX_RETRIES = 2
    llm.push(Reply(status=500), Reply(status=503), "third time lucky")
    assert get_llm_client().chat(messages=[{"role": "user", "content": "x"}]) == "third time lucky"
    assert llm.call_count == 3


def test_an_endpoint_still_failing_after_the_retries_is_unavailable(llm, settings):
    settings.LLM_MAX_RETRIES = 1
    llm.push(Reply(status=500), Reply(status=500))
    with pytest.raises(LLMUnavailable, match="500"):
        get_llm_client().chat(messages=[{"role": "user", "content": "x"}])
    assert llm.call_count == 2


def test_rate_limits_are_temporary(llm):
    llm.push(Reply(status=429))
    with pytest.raises(LLMUnavailable):
        get_llm_client().chat(messages=[{"role": "user", "content": "x"}])


def test_a_slow_endpoint_times_out_as_unavailable(llm, settings):
    settings.LLM_TIMEOUT = 0.3
    llm.push(Reply(content="late", delay=1.5))
    with pytest.raises(LLMUnavailable, match="Timeout"):
        get_llm_client().chat(messages=[{"role": "user", "content": "x"}])


def test_an_unreachable_endpoint_is_unavailable(settings):
    from tests.conftest import free_port

    settings.LLM_BASE_URL = f"http://127.0.0.1:{free_port()}/v1"
    settings.LLM_MAX_RETRIES = 0
    with pytest.raises(LLMUnavailable, match="Connection"):
        get_llm_client().chat(messages=[{"role": "user", "content": "x"}])


@pytest.mark.parametrize("status", [400, 401, 404])
def test_refusals_are_permanent_errors_not_retried(llm, settings, status):
    settings.LLM_MAX_RETRIES = 2
    llm.push(Reply(status=status))
    with pytest.raises(LLMError) as caught:
        get_llm_client().chat(messages=[{"role": "user", "content": "x"}])
    assert not isinstance(caught.value, LLMUnavailable)
    assert llm.call_count == 1


def test_the_fake_server_speaks_tool_calls_and_streaming_to_the_official_sdk(fake_openai):
    """The fake is reused by agent-loop tests: the official SDK must parse what it sends."""
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="k", max_retries=0)
    fake_openai.push(Reply(tool_calls=[tool_call("lookup_knowledge", {"query": "池", "session_id": "s"})]))
    completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    call = completion.choices[0].message.tool_calls[0]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "lookup_knowledge"
    assert json.loads(call.function.arguments) == {"query": "池", "session_id": "s"}

    fake_openai.push("流式 answer")
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], stream=True
    )
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == "流式 answer"
    assert [m.id for m in client.models.list()] == ["fake-model"]
    assert fake_openai.call_count == 2


def test_the_fake_server_can_demand_an_api_key():
    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI(api_key="right") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
