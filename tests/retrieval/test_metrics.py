"""What a lookup leaves in GET /metrics: the lookup counter by level, dedup reason, status and
agent, one stage-histogram observation per stage, the budget's refusals; read the way Prometheus
reads it (prometheus_client's own parser). The counters live in the test process for the whole
run, so each test compares a scrape after its calls with one before them."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from retrieval.agents.tokens import tool_token_issue
from tests.support.lookup_stages import LOOKUP_STAGES

pytestmark = pytest.mark.django_db

URL = "/api/tools/lookup_knowledge"
SCRAPE_TOKEN = "s" * 40
STAGES = set(LOOKUP_STAGES)


def _scrape() -> dict[tuple[str, frozenset], float]:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {SCRAPE_TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def _delta(after, before, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


def _agent(name: str) -> tuple[APIClient, str]:
    token = tool_token_issue(name=name)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    return client, str(token.user.pk)


def _lookup(client, query, session):
    return client.post(URL, {"query": query, "session_id": session}, format="json")


def test_lookups_are_counted_by_level_dedup_status_and_agent(
    settings, seeded_corpus, seeds_rules, session_id
):
    settings.METRICS_TOKEN = SCRAPE_TOKEN
    alice_name = f"alice-{uuid.uuid4().hex[:6]}"
    alice, alice_id = _agent(alice_name)
    bob, bob_id = _agent(f"bob-{uuid.uuid4().hex[:6]}")
    before = _scrape()

    # Sessions of this test alone: the Redis action memory outlives a run.
    first, second = (f"{session_id}-{n}" for n in (1, 2))
    for session in (first, second):
        assert _lookup(alice, "数据库连接池配置", session).json()["relevanceLevel"] == "HIGHLY_RELEVANT"
    again = _lookup(alice, "数据库连接池配置", first).json()  # the session holds the document already
    assert _lookup(bob, "", first).status_code == 400  # refused on its input: recorded as ERROR

    after = _scrape()
    lookups = "agentkb_lookups_total"
    common = {"tool": "lookup_knowledge"}
    assert (
        _delta(
            after,
            before,
            lookups,
            **common,
            level="HIGHLY_RELEVANT",
            dedup_reason="none",
            status="SUCCESS",
            agent=alice_id,
        )
        == 2
    )
    # (compared by count, not by new label sets: on SQLite an earlier test's agent may have had
    # the same id, and the counters outlive each test)
    dedup = sum(
        value - before.get(key, 0.0)
        for key, value in after.items()
        if key[0] == lookups and {("agent", alice_id), ("dedup_reason", "doc_retrieved")} <= key[1]
    )
    assert dedup == 1, again
    assert (
        _delta(
            after, before, lookups, **common, level="none", dedup_reason="none", status="ERROR", agent=bob_id
        )
        == 1
    )
    # Every agent's name is there to join on.
    assert after[("agentkb_agent_info", frozenset({"agent": alice_id, "name": alice_name}.items()))] == 1

    # Three lookups ran the pipeline (the refused one stopped at its input): every stage observed
    # three times, and the whole call's histogram once per recorded call.
    for stage in STAGES:
        assert _delta(after, before, "agentkb_lookup_stage_seconds_count", stage=stage) == 3, stage
    assert _delta(after, before, "agentkb_lookup_stage_seconds_bucket", stage="candidates:l1", le="+Inf") == 3
    assert _delta(after, before, "agentkb_lookup_seconds_count", tool="lookup_knowledge") == 4


def test_a_call_refused_by_the_budget_is_counted(settings, seeded_corpus, session_id):
    settings.METRICS_TOKEN = SCRAPE_TOKEN
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"tool": "2/min"}}
    client, _ = _agent(f"busy-{uuid.uuid4().hex[:6]}")
    before = _scrape()
    statuses = [_lookup(client, "ERR_TIMEOUT", session_id).status_code for _ in range(4)]
    after = _scrape()
    assert statuses == [200, 200, 429, 429]
    assert _delta(after, before, "agentkb_budget_refusals_total", scope="tool") == 2
