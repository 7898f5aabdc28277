"""The thresholds in force, at their edges: which rule gives the pair and what ``source`` says,
the ranges refused (naming the setting) and accepted, a calibration that cannot be used, and how
long a process keeps what it read. Profile values are read from ``retrieval.lookup.profiles``, so these
hold whatever pair a model's profile carries."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection

from retrieval.lookup import thresholds as thresholds_module
from retrieval.lookup.profiles import SEED_HIGHLY_RELEVANT, SEED_REFERENCE, profile_for
from retrieval.lookup.thresholds import (
    Thresholds,
    current_thresholds,
    profile_warning,
    settings_thresholds,
    thresholds_cache_clear,
    thresholds_validate,
)

USE = "use-multilingual-v3"
NO_PROFILE = "flag:/models/bge-large-zh:cls"


def _pair(t: Thresholds) -> tuple[float, float]:
    return (t.highly_relevant, t.reference)


# --- which rule gives the pair --------------------------------------------------------------------
def test_one_explicit_setting_on_a_model_without_profile_keeps_the_seeds_for_the_other(settings):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.3
    t = settings_thresholds(NO_PROFILE)
    assert _pair(t) == (SEED_HIGHLY_RELEVANT, 0.3)
    assert (t.source, t.profile) == ("settings+default", None)
    assert profile_warning(NO_PROFILE) is None  # an explicit setting: the operator chose


def test_an_explicit_reference_alone_keeps_the_profile_s_highly_relevant(settings):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.1
    t = settings_thresholds(USE)
    assert _pair(t) == (profile_for(USE).highly_relevant, 0.1)
    assert (t.source, t.profile) == (f"settings+profile:{USE}", USE)


def test_nothing_set_on_a_model_without_profile_is_the_seeds_pair(settings):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    t = settings_thresholds(NO_PROFILE)
    assert (_pair(t), t.source, t.profile) == ((SEED_HIGHLY_RELEVANT, SEED_REFERENCE), "default", None)


def test_the_l2_bound_always_comes_from_the_settings_as_a_number(settings):
    settings.RETRIEVAL_MAX_L2_DISTANCE = 4
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    t = settings_thresholds(USE)
    assert t.max_l2_distance == 4.0 and isinstance(t.max_l2_distance, float)
    assert t.as_dict() == {
        "max_l2_distance": 4.0,
        "highly_relevant": profile_for(USE).highly_relevant,
        "reference": profile_for(USE).reference,
        "source": f"profile:{USE}",
        "profile": USE,
    }


def test_a_misconfigured_embedding_backend_still_reads_thresholds_and_the_warning_says_so(settings):
    settings.EMBEDDING_BACKEND = "no-such-backend"
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    t = settings_thresholds()
    assert (_pair(t), t.source) == ((SEED_HIGHLY_RELEVANT, SEED_REFERENCE), "default")
    warning = profile_warning()
    assert warning.startswith("The embedding model '?' has no threshold profile")
    assert f"{SEED_HIGHLY_RELEVANT} / {SEED_REFERENCE}" in warning


def test_the_configured_model_s_profile_is_found_without_naming_it(settings):
    settings.EMBEDDING_BACKEND = "use-multilingual"
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    assert settings_thresholds().source == f"profile:{USE}"
    assert profile_warning() is None


# --- ranges ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("max_l2", "highly", "reference"),
    [(1e-9, 0.75, 0.5), (2.0, 0.0, 0.0), (2.0, 1.0, 1.0), (2.0, 0.6, 0.6), (2.0, 1.0, 0.0)],
)
def test_the_edges_of_each_range_are_accepted(max_l2, highly, reference):
    t = Thresholds(max_l2_distance=max_l2, highly_relevant=highly, reference=reference)
    assert thresholds_validate(t) is t


@pytest.mark.parametrize(
    ("max_l2", "highly", "reference", "named"),
    [
        (-1.0, 0.75, 0.5, "RETRIEVAL_MAX_L2_DISTANCE must be > 0; got -1.0"),
        (2.0, 0.75, -0.01, "RETRIEVAL_REFERENCE_THRESHOLD must be within \\[0, 1\\]; got -0.01"),
        (
            2.0,
            1.01,
            0.5,
            "RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD must be within .*got 1.01 \\(reference threshold 0.5\\)",
        ),
        (2.0, 0.49, 0.5, "RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD"),
        (2.0, 1.0, 1.5, "^RETRIEVAL_REFERENCE_THRESHOLD must be within \\[0, 1\\]; got 1.5$"),
    ],
)
def test_out_of_range_thresholds_are_refused_naming_the_setting(max_l2, highly, reference, named):
    with pytest.raises(ImproperlyConfigured, match=named):
        thresholds_validate(Thresholds(max_l2_distance=max_l2, highly_relevant=highly, reference=reference))


# --- calibrations that cannot be used -------------------------------------------------------------
@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", is_staff=True)


@pytest.fixture
def explicit(settings):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.75
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.5
    settings.RETRIEVAL_INDEX_REFRESH_MS = 0
    return settings


@pytest.mark.django_db
def test_a_calibration_left_unordered_by_new_settings_is_ignored_and_logged(explicit, staff, caplog):
    """A calibration of the reference threshold alone (0.6) keeps the settings' HIGHLY_RELEVANT; once
    that setting is lowered below it (0.55) the pair is unordered: the settings serve, with an error."""
    from observability.models import ThresholdCalibration

    explicit.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.55
    row = ThresholdCalibration.objects.create(
        highly_relevant_threshold=None, reference_threshold=0.6, applied_by=staff
    )
    with caplog.at_level(logging.ERROR, logger="retrieval.lookup.thresholds"):
        t = current_thresholds()
    assert (_pair(t), t.source) == ((0.55, 0.5), "settings")
    assert f"calibration {row.pk} holds unordered thresholds" in caplog.text


@pytest.mark.django_db
def test_a_calibration_keeps_the_settings_l2_bound_and_the_profile(explicit, staff):
    from observability.models import ThresholdCalibration

    explicit.RETRIEVAL_MAX_L2_DISTANCE = 3.0
    explicit.EMBEDDING_BACKEND = "use-multilingual"
    ThresholdCalibration.objects.create(
        highly_relevant_threshold=0.7, reference_threshold=0.4, applied_by=staff
    )
    t = current_thresholds()
    assert (t.max_l2_distance, _pair(t), t.profile) == (3.0, (0.7, 0.4), USE)


@pytest.mark.django_db(transaction=True)
def test_a_database_without_the_calibration_table_serves_on_the_settings(explicit, caplog):
    from observability.models import ThresholdCalibration

    table = ThresholdCalibration._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:
        with caplog.at_level(logging.WARNING, logger="retrieval.lookup.thresholds"):
            t = current_thresholds()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    assert (_pair(t), t.source) == ((0.75, 0.5), "settings")
    (warning,) = [r for r in caplog.records if "threshold calibrations unreadable" in r.getMessage()]
    assert warning.exc_info and issubclass(warning.exc_info[0], DatabaseError)  # for the operator


@pytest.mark.django_db
def test_without_the_calibration_module_the_settings_serve(explicit, monkeypatch, staff):
    import sys

    from observability.models import ThresholdCalibration

    ThresholdCalibration.objects.create(
        highly_relevant_threshold=0.7, reference_threshold=0.4, applied_by=staff
    )
    monkeypatch.setitem(sys.modules, "observability.calibration", None)  # the import fails
    t = current_thresholds()
    assert (_pair(t), t.source) == ((0.75, 0.5), "settings")


# --- how long a process keeps what it read ----------------------------------------------------------
class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.django_db
def test_a_new_calibration_is_seen_once_the_refresh_interval_has_passed(explicit, staff, monkeypatch):
    from observability.models import ThresholdCalibration

    clock = Clock(5000.0)
    monkeypatch.setattr(thresholds_module.time, "monotonic", clock)
    explicit.RETRIEVAL_INDEX_REFRESH_MS = 2000
    assert current_thresholds().source == "settings"
    row = ThresholdCalibration.objects.create(
        highly_relevant_threshold=0.7, reference_threshold=0.4, applied_by=staff
    )
    clock.now += 1.999
    assert current_thresholds().source == "settings"  # read less than 2 s ago: kept
    clock.now += 0.001
    assert current_thresholds().source == f"calibration:{row.pk}"  # 2 s: read again


@pytest.mark.django_db
def test_changed_settings_are_seen_at_once_within_the_refresh_interval(explicit):
    explicit.RETRIEVAL_INDEX_REFRESH_MS = 60_000
    assert current_thresholds().reference == 0.5
    explicit.RETRIEVAL_REFERENCE_THRESHOLD = 0.45
    assert current_thresholds().reference == 0.45
    explicit.RETRIEVAL_MAX_L2_DISTANCE = 3.0
    assert current_thresholds().max_l2_distance == 3.0
    explicit.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None  # the source changes with the pair
    assert current_thresholds().highly_relevant != 0.75 or current_thresholds().source != "settings"


@pytest.mark.django_db
def test_a_missing_profile_is_warned_of_once_per_process(settings, caplog):
    settings.EMBEDDING_BACKEND = "no-such-backend"  # no model name: no profile
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    thresholds_module._warned.clear()
    with caplog.at_level(logging.WARNING, logger="retrieval.lookup.thresholds"):
        for _ in range(3):
            thresholds_cache_clear()
            assert current_thresholds().source == "default"
    warnings = [r for r in caplog.records if "has no threshold profile" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.django_db
def test_explicit_thresholds_or_a_profile_log_no_warning(settings, caplog):
    thresholds_module._warned.clear()
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.75
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.5
    with caplog.at_level(logging.WARNING, logger="retrieval.lookup.thresholds"):
        assert current_thresholds().source == "settings"
        settings.EMBEDDING_BACKEND = "use-multilingual"
        settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
        settings.RETRIEVAL_REFERENCE_THRESHOLD = None
        assert current_thresholds().source == f"profile:{USE}"
    assert [r for r in caplog.records if r.name == "retrieval.lookup.thresholds"] == []
