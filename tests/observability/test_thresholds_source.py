"""Where the thresholds in force came from, as the dashboard and the calibration page say it:
the model's profile is "profile <model>", not "settings"; a calibration names its number."""

from dataclasses import dataclass

import pytest
from django.urls import reverse
from django.utils import translation

from observability import calibration

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:observability_retrievaldashboard_changelist")
CALIBRATION = reverse("admin:observability_thresholdcalibration_changelist")


@dataclass
class Pair:
    highly_relevant: float
    reference: float
    source: str


@pytest.fixture(autouse=True)
def _english():
    # The labels are translated: read them in English whatever an earlier test left active.
    with translation.override("en"):
        yield


@pytest.fixture
def reader(monkeypatch):
    def use(source: str) -> None:
        monkeypatch.setattr(calibration, "_settings_reader", lambda: Pair(0.6, 0.35, source))

    return use


@pytest.mark.parametrize(
    ("origin", "label"),
    [
        ("profile:use-multilingual-v3", "profile use-multilingual-v3"),
        ("settings+profile:bge-m3", "settings + profile bge-m3"),
        ("settings", "settings"),
        ("default", "the seeds' default (no profile for this model)"),
    ],
)
def test_the_pair_before_calibration_says_where_it_came_from(reader, origin, label):
    reader(origin)
    in_force = calibration.thresholds_in_force()
    assert in_force.source == "settings"  # what the lookup reads: no calibration in force
    assert in_force.source_label == label


def test_a_calibration_names_its_number(reader, admin_user):
    reader("profile:use-multilingual-v3")
    applied = calibration.calibration_apply(
        highly_relevant_threshold=0.7, reference_threshold=0.5, applied_by=admin_user, evidence={}
    )
    assert calibration.thresholds_in_force().source_label == f"calibration #{applied.pk}"


def test_the_dashboard_and_the_calibration_page_say_profile(admin_client, reader):
    reader("profile:use-multilingual-v3")
    dashboard = admin_client.get(DASHBOARD).content.decode()
    assert '<span id="thresholds-source">profile use-multilingual-v3</span>' in dashboard
    page = admin_client.get(CALIBRATION).content.decode()
    assert "profile use-multilingual-v3" in page and "from settings" not in page
