"""examples/openai_agent.py, run as a script against a live agentkb and the fake OpenAI server.

The fake model never stops asking for lookups (new queries, paraphrases, repeats, even after tools
are switched off): the loop must still end, and agentkb's action memory must never hand a
document over twice.
"""

import itertools
import json
import subprocess
import sys

import pytest

from knowledge.models import ApiDocument
from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue
from retrieval.selectors import executor_prompt_get, lookup_tool_definition
from tests.conftest import REPO
from tests.retrieval.conftest import CJK, english_documents, seed_documents
from tests.support.fake_openai import Reply, tool_call

pytestmark = pytest.mark.django_db(transaction=True)

QUERIES = [
    "数据库连接池配置",
    "数据库连接池怎么设置",
    "ERR_TIMEOUT",
    "连接池配置方法",
    "故障排查",
    "ERR_TIMEOUT",
]


def test_a_model_that_keeps_looking_up_ends_with_no_document_fetched_twice(
    corpus, live_server, fake_openai, settings
):
    seed_documents(corpus)
    token = tool_token_issue(name="example-agent")
    queries = itertools.cycle(QUERIES)

    def always_look_up(body):
        # Two lookups per turn, whatever the conversation says.
        return Reply(
            tool_calls=[
                tool_call("lookup_knowledge", {"query": next(queries), "session_id": "model-made-up"}),
                tool_call("lookup_knowledge", {"query": next(queries)}),
            ]
        )

    fake_openai.responder = always_look_up
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTKB_URL": live_server.url,
        "AGENTKB_TOKEN": token.key,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "test-key",
        "OPENAI_MODEL": "fake-model",
    }
    result = subprocess.run(
        [sys.executable, "examples/openai_agent.py", "数据库连接池怎么配置？", "--max-turns", "10"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stderr.strip().splitlines()[-1])

    # The loop ended on its own, well before --max-turns, with a last call that offered no tools.
    requests = fake_openai.chat_requests()
    assert len(requests) < 10
    assert "tools" not in requests[-1].body and all("tools" in r.body for r in requests[:-1])

    # It used agentkb's tool definition and executor prompt as they are served.
    first = requests[0].body
    assert first["tools"] == [json.loads(json.dumps(lookup_tool_definition()))]
    assert first["messages"][0] == {"role": "system", "content": executor_prompt_get()}
    assert first["messages"][1] == {"role": "user", "content": "数据库连接池怎么配置？"}

    # Every lookup went to one session (the loop's, not the model's), and no document came twice.
    invocations = ToolInvocation.objects.filter(tool_name="lookup_knowledge").order_by("id")
    assert {i.session_id for i in invocations} == {summary["session_id"]}
    assert invocations.count() == summary["lookups"] >= 3
    handed_over = [key for i in invocations for key in i.retrieval_details["returned_doc_keys"]]
    assert handed_over == summary["documents"]
    assert handed_over and len(handed_over) == len(set(handed_over))
    # The loop stopped on a lookup that only found documents handed over before
    assert invocations.last().relevance_level == "DEDUPED"
    assert invocations.last().retrieval_details["returned_doc_keys"] == []


def test_the_models_domains_and_metadata_condition_reach_the_lookup(corpus, live_server, fake_openai):
    seed_documents(corpus)
    pool = ApiDocument.objects.get(doc_key="infrastructure/mysql-pool.md")
    ApiDocument.objects.filter(pk=pool.pk).update(metadata={**pool.metadata, "extra": {"status": "archived"}})
    token = tool_token_issue(name="filtering-agent")
    not_archived = {
        "logical_operator": "and",
        "conditions": [{"name": "status", "comparison_operator": "empty", "value": None}],
    }
    arguments = [
        # The schema the loop hands the model offers both filters; the model fills them.
        {"query": "数据库连接池配置", "domains": ["infrastructure"], "metadata_condition": not_archived},
        {"query": "数据库连接池配置", "metadata_condition": {"conditions": [{"name": "status"}]}},
    ]
    fake_openai.responder = lambda body: Reply(
        tool_calls=[tool_call("lookup_knowledge", arguments.pop(0))] if arguments else None,
        content=None if arguments else "done",
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTKB_URL": live_server.url,
        "AGENTKB_TOKEN": token.key,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "test-key",
        "OPENAI_MODEL": "fake-model",
    }
    result = subprocess.run(
        [sys.executable, "examples/openai_agent.py", "数据库连接池怎么配置？", "--max-turns", "5"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    requests = fake_openai.chat_requests()
    parameters = requests[0].body["tools"][0]["function"]["parameters"]
    assert "metadata_condition" in parameters["properties"] and parameters["required"] == ["query"]
    summary = json.loads(result.stderr.strip().splitlines()[-1])
    assert summary["documents"] and "infrastructure/mysql-pool.md" not in summary["documents"]
    assert all(key.startswith("infrastructure/") for key in summary["documents"])
    # The malformed condition came back to the model as an error naming its field.
    tool_messages = [m for m in requests[-1].body["messages"] if m["role"] == "tool"]
    assert "metadata_condition.conditions[0].comparison_operator" in tool_messages[-1]["content"]


def test_without_a_token_the_script_says_what_is_missing():
    result = subprocess.run(
        [sys.executable, "examples/openai_agent.py", "q"],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "AGENTKB_TOKEN" in result.stderr


ENGLISH_QUERIES = [
    "database connection pool configuration",
    "how do I size the connection pool",
    "ERR_TIMEOUT",
    "connection pool exhausted",
]


def test_an_english_agent_loop_receives_no_chinese(corpus, live_server, fake_openai, settings):
    settings.AGENT_LANGUAGE = "en"
    english_documents(corpus)
    token = tool_token_issue(name="english-agent")
    queries = itertools.cycle(ENGLISH_QUERIES)
    fake_openai.responder = lambda body: Reply(
        tool_calls=[tool_call("lookup_knowledge", {"query": next(queries)})]
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTKB_URL": live_server.url,
        "AGENTKB_TOKEN": token.key,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "test-key",
        "OPENAI_MODEL": "fake-model",
    }
    result = subprocess.run(
        [
            sys.executable,
            "examples/openai_agent.py",
            "How do I configure the connection pool?",
            "--max-turns",
            "8",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    requests = fake_openai.chat_requests()
    lookups = ToolInvocation.objects.filter(tool_name="lookup_knowledge")
    assert (
        lookups.count() >= 2 and lookups.filter(relevance_level__in=("PRECISE", "HIGHLY_RELEVANT")).exists()
    )
    # Everything the loop handed the model came from agentkb (tool definition, executor prompt,
    # lookup results with messages and hints) or from the loop itself: not one Chinese character.
    assert requests[0].body["messages"][0]["content"].startswith("# The Executor role")
    sent = json.dumps([r.body for r in requests], ensure_ascii=False)
    assert "completenessHint" in sent and "message" in sent
    assert not CJK.findall(sent), CJK.findall(sent)[:20]
    assert not CJK.search(result.stdout + result.stderr)
