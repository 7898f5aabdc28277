"""The dashboard by agent (issue 12): staff filter it by agent, see each agent's calls, levels,
not-found rate and dedup reasons, follow a count to exactly those calls, and a hostile agent
name renders as text, clipped. Also the latency-over-time chart (issue 14)."""

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from observability.rollups import NO_AGENT
from tests.observability.factories import ToolInvocationFactory

URL = "admin:observability_retrievaldashboard_changelist"
HOSTILE_NAME = "<script>x</script>" + "e" + "\u0301" * 60 + "🔥" * 80


@pytest.fixture
def two_agents(db, django_user_model):
    honest = django_user_model.objects.create(username="honest-agent")
    hostile = django_user_model.objects.create(username=HOSTILE_NAME[:150])
    now = timezone.now()
    calls = [
        (honest, "PRECISE", None, 10),
        (honest, "REFERENCE", None, 20),
        (honest, None, None, 30),
        (hostile, None, None, 40),
        (hostile, None, None, 50),
        (hostile, "DEDUPED", "doc_retrieved", 60),
        (None, "HIGHLY_RELEVANT", None, 70),
    ]
    for i, (agent, level, dedup, ms) in enumerate(calls):
        ToolInvocationFactory(
            agent=agent,
            relevance_level=level,
            dedup_reason=dedup,
            duration_ms=ms,
            session_id="conv-42",  # the same id for every agent: three sessions
            created_at=now - timedelta(minutes=5 + i),
        )
    return honest, hostile


def _rows(html: str) -> dict[str, str]:
    table = re.search(r'<table class="okb-table" id="table-agents">.*?</table>', html, re.S).group(0)
    return dict(re.findall(r'<tr data-agent="(\d+)">(.*?)</tr>', table, re.S))


def test_the_breakdown_shows_each_agents_calls_levels_not_found_rate_and_dedup(admin_client, two_agents):
    honest, hostile = two_agents
    response = admin_client.get(reverse(URL), {"range": "24h"})
    by_agent = {row["agent"]: row for row in response.context["data"]["agents"]}
    assert set(by_agent) == {honest.pk, hostile.pk, NO_AGENT}
    assert by_agent[hostile.pk]["calls"] == 3 and by_agent[honest.pk]["calls"] == 3
    assert by_agent[hostile.pk]["not_found_rate"] == 66.7 and by_agent[honest.pk]["not_found_rate"] == 33.3
    assert by_agent[hostile.pk]["dedup"]["doc_retrieved"] == 1
    assert by_agent[honest.pk]["levels"]["PRECISE"] == 1
    assert response.context["data"]["sessions"]["sessions"] == 3
    html = response.content.decode()
    rows = _rows(html)
    assert set(rows) == {str(honest.pk), str(hostile.pk), str(NO_AGENT)}
    assert "honest-agent" in rows[str(honest.pk)] and "33.3%" in rows[str(honest.pk)]
    # The hostile name: escaped, its combining marks cut, clipped with the whole name on hover.
    hostile_row = rows[str(hostile.pk)]
    assert "<script>" not in html.split('id="table-agents"')[1].split("</table>")[0]
    assert "&lt;script&gt;" in hostile_row and "\u0301" * 4 not in html
    assert 'class="okb-clip" title="&lt;script&gt;' in hostile_row and "…" in hostile_row


def test_the_breakdown_shows_each_agents_latency_p50_and_p95(admin_client, two_agents):
    honest, hostile = two_agents
    response = admin_client.get(reverse(URL), {"range": "24h"})
    by_agent = {row["agent"]: row for row in response.context["data"]["agents"]}
    # nearest rank over each agent's own calls (10/20/30, 40/50/60 and 70 ms)
    assert (by_agent[honest.pk]["p50_ms"], by_agent[honest.pk]["p95_ms"]) == (20, 30)
    assert (by_agent[hostile.pk]["p50_ms"], by_agent[hostile.pk]["p95_ms"]) == (50, 60)
    assert (by_agent[NO_AGENT]["p50_ms"], by_agent[NO_AGENT]["p95_ms"]) == (70, 70)
    rows = _rows(response.content.decode())
    assert re.search(r'okb-agent-p50">20 ms<.*okb-agent-p95">30 ms<', rows[str(honest.pk)], re.S)


def test_staff_filter_the_dashboard_by_agent_and_its_links_keep_the_agent(admin_client, two_agents):
    _, hostile = two_agents
    response = admin_client.get(reverse(URL), {"range": "24h", "agent": str(hostile.pk)})
    data = response.context["data"]
    assert response.context["filters"].agent == hostile.pk
    assert data["status"]["calls"] == 3 and [r["agent"] for r in data["agents"]] == [hostile.pk]
    levels = {row["label"]: row["count"] for row in data["relevance"]}
    assert levels["not found"] == 2 and levels["DEDUPED"] == 1 and levels["PRECISE"] == 0
    html = response.content.decode()
    # The agent choice is offered under its tamed, clipped name and selected.
    select = re.search(r'<select name="agent".*?</select>', html, re.S).group(0)
    assert re.search(rf'<option value="{hostile.pk}" selected>&lt;script&gt;', select)
    assert "\u0301" * 4 not in select
    # A level link opens the invocation list of this agent only.
    link = response.context["links"]["levels"][-1]["url"]
    assert f"agent__id__exact={hostile.pk}" in link and "level=none" in link
    listing = admin_client.get(link)
    assert listing.status_code == 200
    assert {obj.agent_id for obj in listing.context["cl"].result_list} == {hostile.pk}
    assert len(listing.context["cl"].result_list) == 2


def test_calls_without_an_agent_have_their_own_choice(admin_client, two_agents):
    response = admin_client.get(reverse(URL), {"range": "24h", "agent": str(NO_AGENT)})
    assert response.context["data"]["status"]["calls"] == 1
    link = response.context["links"]["all"]
    assert "agent__isnull=True" in link
    listing = admin_client.get(link)
    assert listing.status_code == 200
    assert [obj.agent_id for obj in listing.context["cl"].result_list] == [None]


def test_an_unknown_agent_is_a_clear_error_naming_the_field(admin_client, two_agents):
    response = admin_client.get(reverse(URL), {"range": "24h", "agent": "999999"})
    assert response.status_code == 200
    assert "agent" in response.context["form"].errors and "data" not in response.context
    response = admin_client.get(reverse(URL), {"range": "24h", "agent": "x"})
    assert "agent" in response.context["form"].errors


def test_the_latency_chart_draws_p50_and_p95_per_hour(admin_client, two_agents):
    response = admin_client.get(reverse(URL), {"range": "24h", "tool": "__all__"})
    over_time = response.context["data"]["latency_over_time"]
    assert over_time["bucket"] == "hour" and sum(over_time["calls"]) == 7
    figure = response.context["figures"]["chart-latency-time"]
    p50, p95 = figure["data"]
    assert (p50["name"], p95["name"]) == ("p50", "p95")
    from observability.models import ToolInvocation

    hours: dict[str, list[int]] = {}
    for call in ToolInvocation.objects.all():
        hours.setdefault(timezone.localtime(call.created_at).strftime("%Y-%m-%d %H:00"), []).append(
            call.duration_ms
        )
    for i, x in enumerate(over_time["x"]):
        values = sorted(hours.get(x, []))
        assert over_time["calls"][i] == len(values)
        # Nearest rank: the ceil(q * n)-th value.
        assert p50["y"][i] == (values[-(-len(values) * 50 // 100) - 1] if values else None), x
        assert p95["y"][i] == (values[-(-len(values) * 95 // 100) - 1] if values else None), x
    html = response.content.decode()
    assert 'id="chart-latency-time"' in html
    drawn = json.loads(re.search(r'id="figure-chart-latency-time"[^>]*>(.*?)</script>', html, re.S).group(1))
    assert drawn["data"][1]["y"] == p95["y"]
