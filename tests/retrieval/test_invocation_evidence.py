"""The invocation page says why a lookup got its level: each candidate's level-model estimate and
the evidence behind it, beside its similarity (which alone does not decide the level)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse

from observability.models import ToolInvocation

pytestmark = pytest.mark.django_db

LOOKUP = "/api/tools/lookup_knowledge"


def test_the_invocation_page_shows_each_candidates_estimate_and_evidence(
    seeded_corpus, agent_client, admin_client
):
    response = agent_client.post(
        LOOKUP, {"query": "如何配置数据库连接池"}, format="json", HTTP_X_SESSION_ID=f"s-{uuid.uuid4().hex}"
    )
    assert response.status_code == 200, response.content
    record = ToolInvocation.objects.get(public_id=response["X-Invocation-Id"])
    levels = record.retrieval_details["levels"]
    assert levels["rule"].startswith("model:")
    primary = response.json()["primary"]["docKey"]
    estimate = next(c["estimate"] for c in levels["candidates"] if c["doc_key"] == primary)

    page = admin_client.get(reverse("admin:observability_toolinvocation_change", args=[record.pk]))
    html = page.content.decode()
    table = html[html.index('id="l1-candidates"') :]
    table = table[: table.index("</table>")]
    primary_row = next(row for row in table.split("<tr>") if primary in row)
    shown = re.search(r'okb-estimate">([^<]*)<', primary_row).group(1)
    assert float(shown) == pytest.approx(estimate, abs=1e-4)
    assert "cos_margin" in primary_row and "bm25_margin" in primary_row


def test_a_record_without_the_level_model_shows_dashes_not_an_error(admin_client):
    record = ToolInvocation.objects.create(
        session_id="s",
        tool_name="lookup_knowledge",
        request={"query": "q"},
        retrieval_details={
            "l1_candidates": [{"doc_key": "a.md", "score": 0.5, "similarity": 0.8}],
            "levels": {
                "rule": "thresholds",
                "candidates": [{"doc_key": "a.md", "estimate": None, "features": {}}],
            },
        },
    )
    html = admin_client.get(
        reverse("admin:observability_toolinvocation_change", args=[record.pk])
    ).content.decode()
    row = html[html.index('id="l1-candidates"') :]
    assert re.search(r'okb-estimate">–<', row) and re.search(r'okb-evidence">–<', row)
