"""The thresholds in force: settings (from the environment), validated, calibrations applied."""

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval.lookup.thresholds import current_thresholds, thresholds_cache_clear
from tests.conftest import REPO


def test_environment_variables_override_the_defaults():
    code = (
        "import django; django.setup();"
        "from retrieval.lookup.thresholds import current_thresholds as c; t = c();"
        "print(t.max_l2_distance, t.highly_relevant, t.reference)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))} | {
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "RETRIEVAL_MAX_L2_DISTANCE": "4",
        "RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD": "0.8",
        "RETRIEVAL_REFERENCE_THRESHOLD": "0.55",
    }
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["4.0", "0.8", "0.55"]


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("RETRIEVAL_MAX_L2_DISTANCE", 0.0, "RETRIEVAL_MAX_L2_DISTANCE"),
        ("RETRIEVAL_REFERENCE_THRESHOLD", 1.5, "RETRIEVAL_REFERENCE_THRESHOLD"),
        ("RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD", 0.3, "RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD"),
    ],
)
@pytest.mark.django_db
def test_unordered_or_out_of_range_thresholds_are_refused_naming_the_setting(settings, name, value, named):
    setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured, match=named):
        current_thresholds()


@pytest.mark.django_db
def test_a_staff_applied_calibration_takes_effect_without_a_restart(settings, django_user_model):
    from observability import calibration
    from observability.models import ThresholdCalibration

    settings.RETRIEVAL_INDEX_REFRESH_MS = 0
    # Explicit settings (without them the model's profile is the base: tests/retrieval/test_profiles.py).
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.75
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.5
    assert current_thresholds().source == "settings"
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    row = ThresholdCalibration.objects.create(
        highly_relevant_threshold=0.7, reference_threshold=0.45, applied_by=staff
    )
    thresholds = current_thresholds()
    assert (thresholds.highly_relevant, thresholds.reference) == (0.7, 0.45)
    assert thresholds.source == f"calibration:{row.pk}"
    assert calibration.thresholds_in_force().calibration_id == row.pk
    ThresholdCalibration.objects.create(reverted=True, applied_by=staff)
    thresholds_cache_clear()
    assert current_thresholds().source == "settings"
    assert current_thresholds().reference == settings.RETRIEVAL_REFERENCE_THRESHOLD


def test_manage_py_check_reports_bad_retrieval_settings(settings):
    from retrieval.checks import retrieval_settings_check

    assert retrieval_settings_check() == []
    settings.RETRIEVAL_DOMAIN_DEDUP = "strict"
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.9
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.8
    messages = retrieval_settings_check()
    assert [m.id for m in messages] == ["retrieval.E001", "retrieval.E002"]
    assert "RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD" in messages[0].msg
    assert "RETRIEVAL_DOMAIN_DEDUP" in messages[1].msg
