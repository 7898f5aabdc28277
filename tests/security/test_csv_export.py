"""Exports safe to open: a query an agent sends as a spreadsheet formula reaches staff's
spreadsheet as text (OWASP CSV injection: a cell starting with = + - @, tab or carriage return
gets a leading single quote)."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from observability.services import invocation_record
from retrieval.agents.tokens import tool_token_issue

FORMULAS = ['=HYPERLINK("http://x","y")', "+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _export(admin_client, **params) -> list[list[str]]:
    response = admin_client.get(reverse("admin:observability_toolinvocation_export"), params)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode("utf-8")
    return list(csv.reader(io.StringIO(text, newline="")))


@pytest.mark.django_db
def test_formulas_an_agent_sends_open_as_text_in_the_export(admin_client):
    # Given: a hostile agent whose calls were recorded with formulas as query and session id
    agent = tool_token_issue(name="formula-agent").user
    for i, formula in enumerate(FORMULAS):
        invocation_record(
            tool_name="lookup_knowledge",
            session_id=formula if i % 2 else f"s-{i}",
            request={"query": formula, "session_id": formula},
            status="SUCCESS",
            duration_ms=3,
            relevance_level="REFERENCE",
            agent_id=agent.pk,
        )

    # When: staff download the invocation list as CSV and open it
    rows = _export(admin_client)

    # Then: no cell starts like a formula; each query is there, behind a single quote
    assert len(rows) == 1 + len(FORMULAS)
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA_STARTS), (row, cell)
    queries = {row[rows[0].index("query")] for row in rows[1:]}
    assert queries == {"'" + formula for formula in FORMULAS}
    sessions = {row[rows[0].index("session_id")] for row in rows[1:]}
    assert {"'+1", "'@SUM(A1)", "'\r=1"} <= sessions


@pytest.mark.django_db
def test_ordinary_text_in_the_export_is_left_as_it_is(admin_client):
    # Given: calls with ordinary queries, one with a formula character inside rather than first
    for query in ["支付失败 ERR_TIMEOUT", "a = b + c", "'quoted already"]:
        invocation_record(
            tool_name="lookup_knowledge",
            session_id="plain",
            request={"query": query},
            status="SUCCESS",
            duration_ms=3,
        )

    # When: staff export them
    rows = _export(admin_client, tool_name="lookup_knowledge")

    # Then: they are exactly what the agents sent
    assert {row[4] for row in rows[1:]} == {"支付失败 ERR_TIMEOUT", "a = b + c", "'quoted already"}
