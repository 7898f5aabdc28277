"""Calibration no agent can steer: a suggestion needs votes of at least three agents (or staff
votes), no agent's votes count for more than a third of the total, and the calibration page
shows each agent's share. A hostile agent with 44 "unhelpful" votes and a sock puppet with one
vote must not move the suggested REFERENCE threshold (before: 0.35 -> 0.60)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from observability import calibration
from observability.models import InvocationFeedback
from tests.observability.factories import ToolInvocationFactory

pytestmark = pytest.mark.django_db
CALIBRATION_PAGE = "admin:observability_thresholdcalibration_changelist"
# 44 judgements spread over 0.36 .. 0.59: results just above REFERENCE 0.35 "never help".
HOSTILE_SIMILARITIES = [round(0.36 + i * 0.23 / 43, 4) for i in range(44)]


def _agent(name: str):
    return get_user_model().objects.get_or_create(username=name)[0]


def _vote(agent, similarity: float, *, helpful: bool) -> None:
    InvocationFeedback.objects.create(
        invocation=ToolInvocationFactory(similarity=similarity, agent=agent),
        user=agent,
        source=InvocationFeedback.Source.AGENT,
        helpful=helpful,
    )


def _hostile_votes() -> None:
    hostile, sock = _agent("hostile"), _agent("sock-puppet")
    for similarity in HOSTILE_SIMILARITIES:
        _vote(hostile, similarity, helpful=False)
    _vote(sock, 0.66, helpful=True)


def _honest_votes() -> None:
    """Three honest agents: below 0.35 results do not help, above they do."""
    for name in ("honest-1", "honest-2", "honest-3"):
        agent = _agent(name)
        for similarity in (0.12, 0.18, 0.22, 0.27, 0.31):
            _vote(agent, similarity, helpful=False)
        for similarity in (0.37, 0.42, 0.5, 0.62, 0.75):
            _vote(agent, similarity, helpful=True)


def _suggestion() -> dict:
    bands = calibration.calibration_bands()
    return calibration.calibration_suggest(bands=bands, current=calibration.thresholds_in_force())


def _page(admin_client) -> str:
    response = admin_client.get(reverse(CALIBRATION_PAGE))
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture(autouse=True)
def _thresholds(settings):
    settings.OBSERVABILITY_CALIBRATION_MIN_FEEDBACK = 20
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD, settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.6, 0.35


def test_44_votes_of_one_agent_and_1_of_another_do_not_move_reference(admin_client):
    # Given: REFERENCE 0.35 in force, and two agents' votes: 44 "unhelpful" and 1 "helpful"
    _hostile_votes()

    # When: staff open the calibration page
    page = _page(admin_client)
    suggestion = _suggestion()

    # Then: no suggestion (two agents are not enough), REFERENCE stays where it is
    assert suggestion["ok"] is False and suggestion["reference"] is None
    assert "only 2 agents (hostile, sock-puppet)" in suggestion["reason"]
    assert 'id="current-reference">0.350<' in page
    assert 'id="suggested-reference">–<' in page
    assert re.search(r'name="reference_threshold" value="0\.35"', page)


def test_one_agent_cannot_outvote_three_honest_ones(admin_client):
    # Given: three honest agents whose votes put REFERENCE at 0.35
    _honest_votes()
    assert _suggestion()["reference"] == 0.35

    # When: a hostile agent adds 44 "unhelpful" votes just above it, and a sock puppet one vote
    _hostile_votes()
    bands = calibration.calibration_bands()
    suggestion = calibration.calibration_suggest(bands=bands, current=calibration.thresholds_in_force())

    # Then: the hostile agent counts for a third, and REFERENCE does not move
    hostile = next(a for a in bands["by_agent"] if a["agent"] == "hostile")
    assert (hostile["votes"], hostile["held"], hostile["counted_share"]) == (44, True, 0.333)
    assert all(a["counted_share"] <= 1 / 3 + 1e-3 for a in bands["by_agent"])
    assert suggestion["ok"] is True and suggestion["reference"] == 0.35
    # (Counted as cast, the same votes would have moved it to 0.60.)
    as_cast = {k: v for k, v in bands.items() if not k.startswith("counted")}
    as_cast["bands"] = [{k: v for k, v in b.items() if not k.startswith("counted")} for b in bands["bands"]]
    assert calibration.calibration_suggest(bands=as_cast, current=calibration.thresholds_in_force())[
        "reference"
    ] == pytest.approx(0.6)


def test_the_page_shows_each_agents_share(admin_client):
    _honest_votes()
    _hostile_votes()

    page = _page(admin_client)

    assert 'id="suggested-reference">0.35<' in page
    row = re.search(r'<tr data-agent="hostile">(.*?)</tr>', page, re.S).group(1)
    # 44 of the 75 votes, counted as a third
    assert '<td class="num agent-share">59%</td>' in row
    assert "33%" in row and "held to a third" in row
    honest = re.search(r'<tr data-agent="honest-1">(.*?)</tr>', page, re.S).group(1)
    assert '<td class="num agent-share">13%</td>' in honest and "held to a third" not in honest
    assert 'id="votes-counted"' in page


def test_staff_votes_count_in_full_beside_fewer_than_three_agents(admin_client, admin_user):
    # Given: staff judged 30 calls (below 0.35 unhelpful, 0.36 .. 0.55 helpful), and one agent 44
    for i in range(30):
        similarity = 0.15 + i * 0.02 if i < 10 else 0.36 + (i - 10) * 0.01
        InvocationFeedback.objects.create(
            invocation=ToolInvocationFactory(similarity=similarity),
            user=admin_user,
            source=InvocationFeedback.Source.STAFF,
            helpful=similarity >= 0.35,
        )
    hostile = _agent("hostile")
    for similarity in HOSTILE_SIMILARITIES:
        _vote(hostile, similarity, helpful=False)

    bands = calibration.calibration_bands()
    suggestion = calibration.calibration_suggest(bands=bands, current=calibration.thresholds_in_force())

    # Then: the agent counts for a third at most (15 of 45), and REFERENCE stays at 0.35
    assert bands["counted"] == 45 and bands["by_agent"][0]["counted"] == 15
    assert suggestion["ok"] is True and suggestion["reference"] == 0.35
