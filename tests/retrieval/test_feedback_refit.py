"""The level model refitted on feedback (``calibrate_thresholds --refit --from-feedback``): each
judged call labels its primary document with the evidence the lookup recorded; a fit is judged on
the half it did not see and refused when worse than the model in force; no agent can steer it."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from observability.models import InvocationFeedback
from retrieval.lookup import level_model
from retrieval.staff.feedback_refit import FeedbackRefused, feedback_asked
from tests.observability.factories import ToolInvocationFactory

pytestmark = pytest.mark.django_db
AGENT, STAFF = InvocationFeedback.Source.AGENT, InvocationFeedback.Source.STAFF

# Evidence of a clear match and of a weak one, as the lookup records it (level_features.FEATURES).
STRONG = {
    "cos_margin": 0.1,
    "bm25_margin": 0.8,
    "bm25_seen": 1.0,
    "coverage": 1.0,
    "cov_margin": 0.5,
    "lcs": 0.7,
    "lcs_margin": 0.4,
}
WEAK = {
    "cos_margin": -0.05,
    "bm25_margin": -0.5,
    "bm25_seen": 1.0,
    "coverage": 0.6,
    "cov_margin": -0.3,
    "lcs": 0.2,
    "lcs_margin": -0.2,
}


def _user(name: str, *, staff: bool = False):
    return get_user_model().objects.get_or_create(username=name, defaults={"is_staff": staff})[0]


def _call(n: int, features: dict | None, *, agent, precise: bool = False):
    key = f"doc-{n}.md"
    candidate = {"doc_key": key, "estimate": 0.5, "features": features or {}, "precise": precise}
    jittered = {k: v + (n % 7) * 0.004 for k, v in (features or {}).items()}
    candidate["features"] = jittered | {"entity_share": 1.0, "has_entities": 0.0} if features else {}
    return ToolInvocationFactory(
        agent=agent,
        retrieval_details={
            "returned_doc_keys": [key],
            "l1_top_similarity": 0.7,
            "levels": {
                "rule": "model:test",
                "candidates": [candidate, {"doc_key": "other.md", "features": STRONG}],
            },
        },
    )


def _vote(invocation, user, helpful: bool, source=STAFF):
    InvocationFeedback.objects.create(invocation=invocation, user=user, source=source, helpful=helpful)


@pytest.fixture
def profiles_dir(tmp_path, monkeypatch):
    """Profiles written by --apply land in a folder of this test's, and none stays loaded."""
    monkeypatch.setattr(level_model, "PROFILES_DIR", tmp_path)
    level_model.level_model_load.cache_clear()
    yield tmp_path
    level_model.level_model_load.cache_clear()


def test_each_judged_call_labels_its_primary_with_the_recorded_evidence():
    staff, agent = _user("staff-1", staff=True), _user("agent-1")
    helped = _call(1, STRONG, agent=agent)
    _vote(helped, agent, helpful=False, source=AGENT)
    _vote(helped, staff, helpful=True)  # staff judged it too: staff's judgement counts
    not_helped = _call(2, WEAK, agent=agent)
    _vote(not_helped, staff, helpful=False)
    _vote(_call(3, None, agent=agent), staff, helpful=True)  # the seeds' rule decided: no evidence
    _vote(_call(4, STRONG, agent=agent, precise=True), staff, helpful=True)  # a PRECISE keyword
    # recorded before the verbatim run was evidence: not fitted as if it had been absent
    older = {k: v for k, v in STRONG.items() if not k.startswith("lcs")}
    _vote(_call(5, older, agent=agent), staff, helpful=True)

    asked = {q.qid: q for q in feedback_asked()}
    assert set(asked) == {f"invocation-{helped.pk}", f"invocation-{not_helped.pk}"}
    first = asked[f"invocation-{helped.pk}"]
    assert first.expected == "doc-1.md" and [c["doc_key"] for c in first.candidates] == ["doc-1.md"]
    assert asked[f"invocation-{not_helped.pk}"].expected is None


def test_one_agents_feedback_alone_cannot_refit(profiles_dir):
    agent = _user("agent-solo")
    for n in range(40):
        _vote(_call(n, WEAK if n % 2 else STRONG, agent=agent), agent, helpful=bool(n % 2), source=AGENT)
    with pytest.raises(FeedbackRefused, match="at least 3 agents"):
        feedback_asked()
    with pytest.raises(CommandError, match="at least 3 agents"):
        call_command("calibrate_thresholds", "--refit", "--from-feedback", "--apply")
    assert not list(profiles_dir.iterdir())


def test_an_agent_voting_most_counts_for_a_third():
    loud, quiet = _user("agent-loud"), [_user(f"agent-quiet-{n}") for n in range(2)]
    loud_calls: set[str] = set()
    n = 0
    for agent, votes in ((loud, 30), (quiet[0], 5), (quiet[1], 5)):
        for _ in range(votes):
            n += 1
            call = _call(n, STRONG, agent=agent)
            _vote(call, agent, helpful=True, source=AGENT)
            if agent is loud:
                loud_calls.add(f"invocation-{call.pk}")
    asked = feedback_asked()
    from_loud = sum(1 for q in asked if q.qid in loud_calls)
    assert len(asked) - from_loud == 10 and from_loud <= 5  # a third of the total: 5 of 15


def test_feedback_the_model_in_force_gets_wrong_is_refitted_and_applied(settings, profiles_dir, capsys):
    # Staff found the clear-looking matches unhelpful and the weak-looking ones helpful: the model
    # in force answers the first and withholds the second, a refit on this feedback the reverse.
    settings.RETRIEVAL_LEVELS = "model"
    staff, agent = _user("staff-2", staff=True), _user("agent-2")
    for n in range(80):
        strong = n % 2 == 0
        _vote(_call(n, STRONG if strong else WEAK, agent=agent), staff, helpful=not strong)
    shipped = level_model.PROFILES_DIR  # (the test's folder: nothing in force to compare with)
    assert not list(shipped.iterdir())

    call_command("calibrate_thresholds", "--refit", "--from-feedback", "--apply")
    out = capsys.readouterr().out
    assert "40 questions fitted on, 40 reported on" in out
    written = json.loads(next(profiles_dir.glob("*.json")).read_text(encoding="utf-8"))
    assert written["fitted"]["data_set"] == "feedback"
    assert (
        written["fitted"]["report_half"]["hit@1"] >= 0.9
        and written["fitted"]["report_half"]["not_found"] >= 0.9
    )


def test_feedback_of_one_kind_only_cannot_refit_and_the_profile_in_force_stays(settings, profiles_dir):
    # (a refit that does worse on the half it did not see is refused by the same decision the
    # file-based refit takes: tests/bench/test_levels_fit.py)
    settings.RETRIEVAL_LEVELS = "model"
    staff, agent = _user("staff-3", staff=True), _user("agent-3")
    for n in range(80):
        strong = n % 2 == 0
        _vote(_call(n, STRONG if strong else WEAK, agent=agent), staff, helpful=not strong)
    call_command("calibrate_thresholds", "--refit", "--from-feedback", "--apply")
    in_force = next(profiles_dir.glob("*.json")).read_text(encoding="utf-8")
    InvocationFeedback.objects.all().update(helpful=False)
    with pytest.raises(CommandError, match="both helpful and unhelpful"):
        call_command("calibrate_thresholds", "--refit", "--from-feedback", "--apply")
    assert next(profiles_dir.glob("*.json")).read_text(encoding="utf-8") == in_force


def test_from_feedback_names_what_it_goes_with():
    with pytest.raises(CommandError, match="--from-feedback goes with --refit"):
        call_command("calibrate_thresholds", "--from-feedback")
    with pytest.raises(CommandError, match="one of the two"):
        call_command("calibrate_thresholds", "--refit")
