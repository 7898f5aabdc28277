"""Threshold calibration from feedback: bands, the suggestion, applying it (who, when) and the
lookup's thresholds following it without a restart."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from observability import calibration
from observability.models import InvocationFeedback, ThresholdCalibration
from tests.observability.factories import ToolInvocationFactory


def _voter():
    from django.contrib.auth import get_user_model

    # Four agents in turn: a suggestion needs votes of three or more agents, none above a third.
    turn = InvocationFeedback.objects.count() % 4
    return get_user_model().objects.get_or_create(username=f"voter-{turn}")[0]


def judge(similarity: float, helpful: bool, n: int = 1, user=None) -> None:
    for _ in range(n):
        InvocationFeedback.objects.create(
            invocation=ToolInvocationFactory(similarity=similarity),
            user=user or _voter(),
            source=InvocationFeedback.Source.AGENT,
            helpful=helpful,
        )


@pytest.fixture
def judged(db):
    """Below 0.6 results do not help, 0.6-0.8 mostly do, from 0.8 on nearly always."""
    judge(0.42, helpful=False, n=6)
    judge(0.52, helpful=False, n=5)
    judge(0.57, helpful=True, n=1)
    judge(0.63, helpful=True, n=6)
    judge(0.66, helpful=False, n=2)
    judge(0.72, helpful=True, n=4)
    judge(0.72, helpful=False, n=1)
    judge(0.83, helpful=True, n=9)
    judge(0.91, helpful=True, n=6)
    judge(0.91, helpful=False, n=1)


def test_bands_count_judgements_at_the_lookups_similarity(judged):
    bands = calibration.calibration_bands()
    by_lo = {b["lo"]: (b["helpful"], b["unhelpful"]) for b in bands["bands"] if b["judged"]}
    assert by_lo == {
        0.4: (0, 6),
        0.5: (0, 5),
        0.55: (1, 0),
        0.6: (6, 0),
        0.65: (0, 2),
        0.7: (4, 1),
        0.8: (9, 0),
        0.9: (6, 1),
    }
    assert (bands["helpful"], bands["unhelpful"]) == (26, 15)
    assert next(b for b in bands["bands"] if b["lo"] == 0.7)["rate"] == 0.8


def test_judgements_without_similarity_do_not_count(db):
    InvocationFeedback.objects.create(
        invocation=ToolInvocationFactory(relevance_level="PRECISE", similarity=None),
        source=InvocationFeedback.Source.AGENT,
        helpful=True,
    )
    assert calibration.calibration_bands()["helpful"] == 0


def test_suggestion_separates_helpful_from_unhelpful(judged, settings):
    settings.OBSERVABILITY_CALIBRATION_MIN_FEEDBACK = 20
    settings.OBSERVABILITY_CALIBRATION_TARGET_PRECISION = 0.9
    settings.OBSERVABILITY_CALIBRATION_MIN_BAND = 5
    suggestion = calibration.calibration_suggest(
        bands=calibration.calibration_bands(), current=calibration.thresholds_in_force()
    )
    assert suggestion["ok"] is True
    # Cut 0.55 keeps all 26 helpful and 4 of 15 unhelpful: J = 1 - 4/15 = 0.733, the best.
    assert suggestion["reference"] == 0.55
    assert suggestion["best_j"] == 0.733
    cut = {c["cut"]: c for c in suggestion["cuts"]}
    assert (cut[0.55]["helpful_above"], cut[0.55]["unhelpful_above"]) == (26, 4)
    # From 0.7 on 19 of 21 helped (0.905 >= 0.9); from 0.6 on only 25 of 29 (0.862).
    assert cut[0.7]["precision_above"] == 0.905 and cut[0.6]["precision_above"] == 0.862
    assert suggestion["highly_relevant"] == 0.7


def test_no_suggestion_from_too_little_feedback(db, settings):
    settings.OBSERVABILITY_CALIBRATION_MIN_FEEDBACK = 20
    judge(0.8, helpful=True, n=3)
    judge(0.3, helpful=False, n=3)
    suggestion = calibration.calibration_suggest(
        bands=calibration.calibration_bands(), current=calibration.thresholds_in_force()
    )
    assert suggestion["ok"] is False and "at least 20" in suggestion["reason"]


def test_apply_records_who_and_when_and_changes_the_thresholds_in_force(judged, admin_user):
    assert calibration.thresholds_in_force().source == "settings"
    applied = calibration.calibration_apply(
        highly_relevant_threshold=0.7,
        reference_threshold=0.55,
        applied_by=admin_user,
        evidence={"helpful": 26, "unhelpful": 15},
    )
    assert (
        applied.applied_by == admin_user and applied.applied_at is not None and applied.feedback_count == 41
    )
    now = calibration.thresholds_in_force()
    assert (now.reference, now.highly_relevant, now.source, now.calibration_id) == (
        0.55,
        0.7,
        "calibration",
        applied.pk,
    )
    calibration.calibration_revert(applied_by=admin_user)
    assert calibration.thresholds_in_force().source == "settings"


@pytest.mark.parametrize(
    ("hr", "ref", "field"),
    [
        (1.2, 0.5, "highly_relevant_threshold"),
        (0.7, -0.1, "reference_threshold"),
        (0.6, 0.7, "reference_threshold"),
    ],
)
def test_apply_refuses_bad_thresholds_naming_the_field(db, admin_user, hr, ref, field):
    with pytest.raises(ValidationError) as caught:
        calibration.calibration_apply(
            highly_relevant_threshold=hr, reference_threshold=ref, applied_by=admin_user
        )
    assert field in caught.value.message_dict
    assert not ThresholdCalibration.objects.exists()


def test_the_lookup_uses_an_applied_calibration_without_a_restart(db, admin_user, settings):
    from retrieval.lookup.thresholds import current_thresholds, thresholds_cache_clear

    settings.RETRIEVAL_INDEX_REFRESH_MS = 0  # re-read at once (in production: every few seconds)
    # Explicit settings: without them the base is the embedding model's profile ("profile:<name>").
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD, settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.75, 0.5
    thresholds_cache_clear()
    try:
        assert current_thresholds().source == "settings"
        applied = calibration.calibration_apply(
            highly_relevant_threshold=0.8, reference_threshold=0.6, applied_by=admin_user
        )
        now = current_thresholds()
        assert (now.highly_relevant, now.reference, now.source) == (0.8, 0.6, f"calibration:{applied.pk}")
        calibration.calibration_revert(applied_by=admin_user)
        assert current_thresholds().source == "settings"
    finally:
        thresholds_cache_clear()


# --- the admin page ------------------------------------------------------------------------------


def test_calibration_page_shows_bands_suggestion_and_history(admin_client, judged):
    response = admin_client.get(reverse("admin:observability_thresholdcalibration_changelist"))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="suggested-reference">0.55<' in html and 'id="suggested-highly-relevant">0.70<' in html
    assert response.context["apply_form"].initial == {
        "reference_threshold": 0.55,
        "highly_relevant_threshold": 0.7,
    }
    assert "none: the settings are in force" in html


def test_applying_from_the_page_is_a_deliberate_recorded_action(admin_client, admin_user, judged):
    url = reverse("admin:observability_calibration_apply")
    unconfirmed = admin_client.post(url, {"reference_threshold": "0.55", "highly_relevant_threshold": "0.7"})
    assert unconfirmed.status_code == 400 and not ThresholdCalibration.objects.exists()
    response = admin_client.post(
        url,
        {
            "reference_threshold": "0.55",
            "highly_relevant_threshold": "0.7",
            "confirm": "on",
            "note": "first calibration",
        },
    )
    assert response.status_code == 302
    applied = ThresholdCalibration.objects.get()
    assert (applied.reference_threshold, applied.highly_relevant_threshold, applied.applied_by) == (
        0.55,
        0.7,
        admin_user,
    )
    assert applied.evidence["reference"] == 0.55 and len(applied.evidence["bands"]) == 20
    page = admin_client.get(reverse("admin:observability_thresholdcalibration_changelist")).content.decode()
    assert 'id="current-reference">0.550<' in page and "first calibration" in page


def test_staff_who_may_only_view_cannot_apply(client, django_user_model, judged):
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_thresholdcalibration"))
    client.force_login(staff)
    assert client.get(reverse("admin:observability_thresholdcalibration_changelist")).status_code == 200
    response = client.post(
        reverse("admin:observability_calibration_apply"),
        {"reference_threshold": "0.55", "highly_relevant_threshold": "0.7", "confirm": "on"},
    )
    assert response.status_code == 403 and not ThresholdCalibration.objects.exists()
