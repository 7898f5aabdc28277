"""The dashboard tells the right story: the tool it shows is the tool its dropdown names, Dify
calls have their own outcome (records returned or none) and never count as "not found", an
empty range says so, and count axes are whole numbers."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from observability.models import ToolInvocation
from tests.observability.factories import ToolInvocationFactory

URL = "admin:observability_retrievaldashboard_changelist"


@pytest.fixture
def mixed(db):
    now = timezone.now()
    for i in range(3):
        ToolInvocationFactory(
            relevance_level="REFERENCE", similarity=0.6, created_at=now - timedelta(minutes=i + 1)
        )
    ToolInvocationFactory(
        relevance_level=None, similarity=0.2, query="找不到", created_at=now - timedelta(minutes=9)
    )
    for i, keys in enumerate([["api/a.md"], ["api/b.md", "api/c.md"], []]):
        ToolInvocation.objects.create(
            tool_name="dify_retrieval",
            session_id="dify",
            request={"query": "支付失败", "source": "dify"},
            status=ToolInvocation.Status.SUCCESS,
            retrieval_details={"returned_doc_keys": keys},
            created_at=now - timedelta(minutes=20 + i),
        )


def _selected_tool(html: str) -> str:
    import re

    select = re.search(r'<select name="tool".*?</select>', html, re.S).group(0)
    return re.search(r'<option value="([^"]*)"[^>]*selected', select).group(1)


def test_a_range_alone_keeps_the_lookup_tool_shown_and_selected(admin_client, mixed):
    response = admin_client.get(reverse(URL), {"range": "7d"})
    assert response.context["filters"].tool_name == "lookup_knowledge"
    assert _selected_tool(response.content.decode()) == "lookup_knowledge"
    assert response.context["data"]["status"]["calls"] == 4


def test_dify_calls_have_their_own_outcome_and_are_never_not_found(admin_client, mixed):
    response = admin_client.get(reverse(URL), {"range": "24h", "tool": "__all__"})
    data = response.context["data"]
    assert data["dify"] == {"calls": 3, "records": 2, "none": 1, "errors": 0}
    levels = {row["label"]: row["count"] for row in data["relevance"]}
    assert levels["not found"] == 1 and sum(levels.values()) == 4
    assert [row["query"] for row in data["not_found"]] == ["找不到"]
    assert data["status"]["calls"] == 7  # the status rates count every call
    html = response.content.decode()
    assert 'id="dify-records">2<' in html and 'id="dify-none">1<' in html

    only_dify = admin_client.get(reverse(URL), {"range": "24h", "tool": "dify_retrieval"})
    assert _selected_tool(only_dify.content.decode()) == "dify_retrieval"
    assert only_dify.context["data"]["not_found"] == []
    assert "figure-chart-relevance" not in only_dify.content.decode()


def test_an_empty_range_says_so(admin_client, db):
    html = admin_client.get(reverse(URL), {"range": "1h"}).content.decode()
    assert 'id="dashboard-empty"' in html and "No calls in this range." in html
    assert "figure-chart-relevance" not in html


def test_count_axes_are_whole_numbers(admin_client, mixed):
    response = admin_client.get(reverse(URL), {"range": "24h"})
    figures = response.context["figures"]
    for name in ("chart-relevance", "chart-sessions", "chart-relevance-time"):
        axis = figures[name]["layout"]["yaxis"]
        assert axis["tickformat"] == "d" and axis["dtick"] == 1, name
