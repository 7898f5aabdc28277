"""Calibration that one agent cannot steer: one vote per invocation, votes by source and by
agent, no suggestion from a single agent's votes unless staff choose so, Dify apart; and the
page that shows it (progress toward the minimum, the calls nobody judged, one name)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from observability import calibration
from observability.charts import calibration_figure
from observability.models import InvocationFeedback
from tests.observability.factories import ToolInvocationFactory

pytestmark = pytest.mark.django_db
AGENT, STAFF = InvocationFeedback.Source.AGENT, InvocationFeedback.Source.STAFF


def _user(name: str, *, staff: bool = False):
    return get_user_model().objects.get_or_create(username=name, defaults={"is_staff": staff})[0]


def _call(similarity: float, *, agent, tool: str = "lookup_knowledge"):
    return ToolInvocationFactory(similarity=similarity, agent=agent, tool_name=tool)


def _vote(invocation, user, helpful: bool, source=AGENT):
    return InvocationFeedback.objects.create(invocation=invocation, user=user, source=source, helpful=helpful)


@pytest.fixture
def honest_world(settings):
    """Three honest agents (a suggestion needs three): results below 0.5 do not help, above do."""
    settings.OBSERVABILITY_CALIBRATION_MIN_FEEDBACK = 20
    for name in ("honest-1", "honest-2", "honest-3"):
        agent = _user(name)
        for sim in (0.32, 0.37, 0.42, 0.47, 0.46):
            _vote(_call(sim, agent=agent), agent, helpful=False)
        for sim in (0.53, 0.58, 0.63, 0.68, 0.71):
            _vote(_call(sim, agent=agent), agent, helpful=True)


def _suggest(vote_filter=None):
    bands = calibration.calibration_bands(vote_filter)
    return bands, calibration.calibration_suggest(bands=bands, current=calibration.thresholds_in_force())


def test_thirty_inverted_votes_of_one_agent_on_one_call_are_one_vote(honest_world):
    reference_before = _suggest()[1]["reference"]
    hostile = _user("hostile")
    target = _call(0.72, agent=hostile)
    _vote(target, hostile, helpful=False)
    # Other tokens judging the same call (possible before ownership) add nothing either.
    for i in range(29):
        _vote(target, _user(f"sock-{i}"), helpful=False)
    bands, suggestion = _suggest()
    assert bands["helpful"] + bands["unhelpful"] == 31
    assert suggestion["reference"] == reference_before == 0.5


def test_a_staff_judgement_outweighs_the_agents_on_the_same_call(honest_world):
    hostile = _user("hostile")
    call = _call(0.81, agent=hostile)
    _vote(call, hostile, helpful=False)
    _vote(call, _user("reviewer", staff=True), helpful=True, source=STAFF)
    bands = calibration.calibration_bands()
    band = next(b for b in bands["bands"] if b["lo"] == 0.8)
    assert (band["helpful"], band["unhelpful"]) == (1, 0)
    assert bands["by_source"][STAFF] == {"helpful": 1, "unhelpful": 0}
    assert {a["agent"]: (a["helpful"], a["unhelpful"]) for a in bands["by_agent"]} == {
        "honest-1": (5, 5),
        "honest-2": (5, 5),
        "honest-3": (5, 5),
    }


def test_one_agents_votes_alone_suggest_nothing_unless_staff_choose_so(settings):
    settings.OBSERVABILITY_CALIBRATION_MIN_FEEDBACK = 20
    hostile = _user("hostile")
    # Thirty inverted judgements, each on a call of its own: a lone agent trying to move REFERENCE up.
    for i in range(30):
        sim = 0.40 + i * 0.02
        _vote(_call(sim, agent=hostile), hostile, helpful=sim >= 0.7)
    bands, suggestion = _suggest()
    assert bands["single_agent"] == "hostile"
    assert suggestion["ok"] is False and "one agent (hostile)" in suggestion["reason"]

    _, chosen = _suggest(calibration.VoteFilter(single_agent=True))
    assert chosen["ok"] is True and chosen["reference"] == 0.7

    # Leaving an agent out is the other choice staff have.
    honest = _user("honest")
    for i in range(20):
        sim = 0.40 + i * 0.02
        _vote(_call(sim, agent=honest), honest, helpful=sim >= 0.5)
    _, without = _suggest(calibration.VoteFilter(exclude_agents=("hostile",)))
    assert without["ok"] is False and "one agent (honest)" in without["reason"]
    _, staff_only = _suggest(calibration.VoteFilter(source=STAFF))
    assert staff_only["helpful"] + staff_only["unhelpful"] == 0


def test_dify_calls_are_calibrated_apart_from_lookups(honest_world):
    dify_agent = _user("dify-app")
    for _ in range(10):
        _vote(_call(0.9, agent=dify_agent, tool="dify_retrieval"), dify_agent, helpful=False)
    lookups = calibration.calibration_bands()
    assert lookups["helpful"] + lookups["unhelpful"] == 30
    dify = calibration.calibration_bands(calibration.VoteFilter(tool="dify_retrieval"))
    assert (dify["helpful"], dify["unhelpful"]) == (0, 10)


def test_the_rate_line_is_not_drawn_across_bands_without_votes(honest_world):
    bands = calibration.calibration_bands()["bands"]
    line = calibration_figure(bands=bands, reference=0.5, highly_relevant=0.75, title="t")["data"][2]
    assert line["connectgaps"] is False
    assert len(line["x"]) == len(line["y"]) == 20
    assert [y is None for y in line["y"]] == [b["judged"] == 0 for b in bands]


# --- the page ----------------------------------------------------------------------------------------
def test_the_page_shows_progress_votes_by_source_and_agent_and_links_the_unjudged_calls(
    admin_client, settings
):
    settings.OBSERVABILITY_CALIBRATION_MIN_FEEDBACK = 20
    agent = _user("honest-1")
    _vote(_call(0.6, agent=agent), agent, helpful=True)
    _vote(_call(0.3, agent=agent), agent, helpful=False)
    unjudged = _call(0.55, agent=agent)

    page = admin_client.get(reverse("admin:observability_thresholdcalibration_changelist"))
    html = page.content.decode()
    assert page.status_code == 200
    assert "2 / 20 judgements" in html
    assert 'id="table-sources"' in html and 'id="table-agents"' in html and "honest-1" in html
    # One name for the page: its title and the sidebar's entry.
    assert "<title>Threshold calibration" in html
    assert ">Threshold calibration</a>" in html

    listing = admin_client.get(reverse("admin:observability_calibration_unjudged") + "?tool=lookup_knowledge")
    assert listing.status_code == 200
    assert (
        reverse("admin:observability_toolinvocation_change", args=[unjudged.pk]) in listing.content.decode()
    )
    judged = list(InvocationFeedback.objects.values_list("invocation", flat=True))
    for pk in judged:
        assert reverse("admin:observability_toolinvocation_change", args=[pk]) not in listing.content.decode()


def test_dify_votes_cannot_be_applied_as_lookup_thresholds(admin_client):
    page = admin_client.get(
        reverse("admin:observability_thresholdcalibration_changelist") + "?tool=dify_retrieval"
    )
    assert page.status_code == 200 and 'id="dify-note"' in page.content.decode()
    assert 'id="apply-form"' not in page.content.decode()
    refused = admin_client.post(
        reverse("admin:observability_calibration_apply") + "?tool=dify_retrieval",
        {"reference_threshold": "0.5", "highly_relevant_threshold": "0.8", "note": ""},
    )
    assert refused.status_code == 403
