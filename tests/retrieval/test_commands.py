"""The management commands: lookup (for people) and issue_tool_token."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from observability.models import ToolInvocation
from retrieval.agents.tokens import token_lookup

pytestmark = pytest.mark.django_db


def _run(*args):
    out = StringIO()
    call_command("lookup", *args, stdout=out)
    return out.getvalue()


def _sections(text):
    agent, details = text.split("== retrieval details")
    agent_json = agent.split("== what the agent gets", 1)[1]
    return json.loads(agent_json), json.loads(details.split("\n", 1)[1])


def test_lookup_prints_the_agent_body_and_the_raw_details(seeded_corpus, session_id, seeds_rules):
    body, details = _sections(_run("数据库连接池配置", "--session", session_id))
    assert body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert "l1_top_score" not in body and details["l1_top_score"] is not None
    assert details["l1_candidates"][0]["doc_key"] == "infrastructure/mysql-pool.md"
    record = ToolInvocation.objects.get()
    assert record.session_id == session_id and record.request["source"] == "cli"
    # The session was marked like an agent's.
    body, _ = _sections(_run("数据库连接池配置", "--session", session_id))
    assert body["relevanceLevel"] == "DEDUPED"


def test_lookup_dry_run_leaves_no_trace(seeded_corpus, session_id, seeds_rules):
    for _ in range(2):
        body, _ = _sections(_run("数据库连接池配置", "--session", session_id, "--dry-run"))
        assert body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert ToolInvocation.objects.count() == 0


def test_lookup_bad_input_names_the_field(db):
    with pytest.raises(CommandError, match="query"):
        _run("   ")


def test_issue_tool_token_prints_the_key_alone_on_the_last_line():
    out, err = StringIO(), StringIO()
    call_command("issue_tool_token", "support-bot", stdout=out, stderr=err)
    key = out.getvalue().strip().splitlines()[-1]
    assert token_lookup(key).user.username == "support-bot"
