"""The normalisation thresholds in force: the one place the lookup reads them from.

Settings give the defaults (``RETRIEVAL_MAX_L2_DISTANCE``, ``RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD``,
``RETRIEVAL_REFERENCE_THRESHOLD``). Staff can apply calibrated thresholds from feedback (seed 000
Phase 2 "分数反馈调优", ``observability.calibration``): the latest applied pair wins over the
settings until staff revert to them; each process re-reads it at most every
``RETRIEVAL_INDEX_REFRESH_MS``. ``max_l2_distance`` always comes from the settings.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Thresholds:
    max_l2_distance: float
    highly_relevant: float
    reference: float
    #: "settings", or "calibration:<id>" when a staff-applied calibration is in force.
    source: str = "settings"

    def as_dict(self) -> dict:
        return {
            "max_l2_distance": self.max_l2_distance,
            "highly_relevant": self.highly_relevant,
            "reference": self.reference,
            "source": self.source,
        }


def thresholds_validate(thresholds: Thresholds) -> Thresholds:
    """Refuse thresholds that would make the levels meaningless, naming the setting at fault."""
    if not thresholds.max_l2_distance > 0:
        raise ImproperlyConfigured(f"RETRIEVAL_MAX_L2_DISTANCE must be > 0; got {thresholds.max_l2_distance}")
    if not 0 <= thresholds.reference <= 1:
        raise ImproperlyConfigured(
            f"RETRIEVAL_REFERENCE_THRESHOLD must be within [0, 1]; got {thresholds.reference}"
        )
    if not thresholds.reference <= thresholds.highly_relevant <= 1:
        raise ImproperlyConfigured(
            "RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD must be within "
            f"[RETRIEVAL_REFERENCE_THRESHOLD, 1]; got {thresholds.highly_relevant} "
            f"(reference threshold {thresholds.reference})"
        )
    return thresholds


def settings_thresholds() -> Thresholds:
    return thresholds_validate(
        Thresholds(
            max_l2_distance=float(settings.RETRIEVAL_MAX_L2_DISTANCE),
            highly_relevant=float(settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD),
            reference=float(settings.RETRIEVAL_REFERENCE_THRESHOLD),
        )
    )


def _calibrated(base: Thresholds) -> Thresholds:
    """The staff-applied calibration in force, if any, over the settings' thresholds."""
    try:
        from observability.calibration import thresholds_in_force
    except ImportError:  # observability without calibration: the settings are all there is
        return base
    try:
        applied = thresholds_in_force()
    except DatabaseError:
        # A database without the calibration table (an adopted original-service schema before
        # its migration) still serves lookups on the settings.
        logger.warning("threshold calibrations unreadable; using the settings", exc_info=True)
        return base
    if applied.source == "settings":
        return base
    calibrated = Thresholds(
        max_l2_distance=base.max_l2_distance,
        highly_relevant=float(applied.highly_relevant),
        reference=float(applied.reference),
        source=f"calibration:{applied.calibration_id}",
    )
    try:
        return thresholds_validate(calibrated)
    except ImproperlyConfigured:
        logger.error("calibration %s holds unordered thresholds; using the settings", applied.calibration_id)
        return base


_lock = threading.Lock()
_cached: tuple[float, tuple, Thresholds] | None = None


def current_thresholds() -> Thresholds:
    """The thresholds in force now: the settings, or the latest staff-applied calibration
    (``observability.calibration.thresholds_in_force``). Each process re-reads the calibration
    at most every ``RETRIEVAL_INDEX_REFRESH_MS``, so an applied pair takes effect within that
    time, without a restart, and a lookup costs no extra query in between."""
    global _cached
    base = settings_thresholds()
    key = (base.max_l2_distance, base.highly_relevant, base.reference)
    now = time.monotonic()
    cached = _cached
    if (
        cached is not None
        and cached[1] == key
        and now - cached[0] < settings.RETRIEVAL_INDEX_REFRESH_MS / 1000
    ):
        return cached[2]
    thresholds = _calibrated(base)
    with _lock:
        _cached = (now, key, thresholds)
    return thresholds


def thresholds_cache_clear() -> None:
    global _cached
    with _lock:
        _cached = None
