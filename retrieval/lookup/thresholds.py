"""The normalisation thresholds in force: the one place the lookup reads them from.

Each HIGHLY_RELEVANT / REFERENCE threshold comes from the first of:

1. a staff-applied calibration (seed 000 Phase 2 "分数反馈调优", ``observability.calibration``;
   ``source`` "calibration:<id>"), re-read by each process at most every
   ``RETRIEVAL_INDEX_REFRESH_MS``, in force until staff revert it;
2. an explicit ``RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD`` / ``RETRIEVAL_REFERENCE_THRESHOLD`` setting
   (``source`` "settings");
3. the embedding model's measured profile (``retrieval.lookup.profiles``; ``source`` "profile:<name>");
4. the seeds' 0.75 / 0.5 when the model has no profile (``source`` "default"), with a warning
   (``profile_warning``: logged once per process, shown by ``manage.py check`` and the admin).

A pair mixing explicit settings and the profile says both ("settings+profile:<name>").
``max_l2_distance`` always comes from the settings.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from retrieval.lookup.level_model import LevelModel, level_model_load
from retrieval.lookup.profiles import SEED_HIGHLY_RELEVANT, SEED_REFERENCE, profile_for

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Thresholds:
    max_l2_distance: float
    highly_relevant: float
    reference: float
    #: which rule gave the pair (see the module docstring)
    source: str = "settings"
    #: the embedding model's profile, when it has one (whether or not it is in force)
    profile: str | None = None

    def as_dict(self) -> dict:
        return {
            "max_l2_distance": self.max_l2_distance,
            "highly_relevant": self.highly_relevant,
            "reference": self.reference,
            "source": self.source,
            "profile": self.profile,
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


def _model_name() -> str:
    """The configured embedding model's name, without loading its weights."""
    from knowledge.embeddings import embedding_signature

    return embedding_signature()[0]


def settings_thresholds(model_name: str | None = None) -> Thresholds:
    """The thresholds before any calibration: explicit settings, else the model's profile, else
    the seeds' pair."""
    if model_name is None:
        try:
            model_name = _model_name()
        except Exception:  # a misconfigured backend fails where it is used; thresholds still read
            model_name = ""
    profile = profile_for(model_name)
    explicit_high = settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD
    explicit_ref = settings.RETRIEVAL_REFERENCE_THRESHOLD
    base_high = profile.highly_relevant if profile else SEED_HIGHLY_RELEVANT
    base_ref = profile.reference if profile else SEED_REFERENCE
    base_source = f"profile:{profile.name}" if profile else "default"
    explicit = [v is not None for v in (explicit_high, explicit_ref)]
    if all(explicit):
        source = "settings"
    elif any(explicit):
        source = f"settings+{base_source}"
    else:
        source = base_source
    return thresholds_validate(
        Thresholds(
            max_l2_distance=float(settings.RETRIEVAL_MAX_L2_DISTANCE),
            highly_relevant=float(base_high if explicit_high is None else explicit_high),
            reference=float(base_ref if explicit_ref is None else explicit_ref),
            source=source,
            profile=profile.name if profile else None,
        )
    )


def profile_warning(model_name: str | None = None) -> str | None:
    """Why the levels may not mean what they say: the model has no measured profile and no
    explicit thresholds are set. None when all is well (for the admin and ``manage.py check``)."""
    thresholds = settings_thresholds(model_name)
    if thresholds.source != "default":
        return None
    name = model_name if model_name is not None else _safe_model_name()
    return (
        f"The embedding model '{name}' has no threshold profile and no RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD"
        f" / RETRIEVAL_REFERENCE_THRESHOLD is set: relevance levels use the seeds' "
        f"{SEED_HIGHLY_RELEVANT} / {SEED_REFERENCE}, calibrated for BGE-M3. Measure this model "
        "(bench/quality.py, manage.py calibrate_thresholds) and set the thresholds."
    )


def _safe_model_name() -> str:
    try:
        return _model_name()
    except Exception:
        return "?"


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
        profile=base.profile,
    )
    try:
        return thresholds_validate(calibrated)
    except ImproperlyConfigured:
        logger.error("calibration %s holds unordered thresholds; using the settings", applied.calibration_id)
        return base


_lock = threading.Lock()
_cached: tuple[float, tuple, Thresholds] | None = None
_warned: set[str] = set()


def current_thresholds() -> Thresholds:
    """The thresholds in force now (see the module docstring). Each process re-reads the
    calibration at most every ``RETRIEVAL_INDEX_REFRESH_MS``, so an applied pair takes effect
    within that time, without a restart, and a lookup costs no extra query in between."""
    global _cached
    base = settings_thresholds()
    key = (base.max_l2_distance, base.highly_relevant, base.reference, base.source)
    now = time.monotonic()
    cached = _cached
    if (
        cached is not None
        and cached[1] == key
        and now - cached[0] < settings.RETRIEVAL_INDEX_REFRESH_MS / 1000
    ):
        return cached[2]
    if base.source == "default" and base.source not in _warned:
        _warned.add(base.source)
        logger.warning("%s", profile_warning())
    thresholds = _calibrated(base)
    with _lock:
        _cached = (now, key, thresholds)
    return thresholds


def thresholds_cache_clear() -> None:
    global _cached
    with _lock:
        _cached = None


def current_level_model() -> LevelModel | None:
    """The level model in force: under ``RETRIEVAL_LEVELS=model`` (the default) the one fitted
    for the embedding model's profile (``retrieval.lookup.level_model``); None under
    ``thresholds``, or when the model has no level profile (the seeds' rule then decides)."""
    if settings.RETRIEVAL_LEVELS != "model":
        return None
    override = _level_override.get("model", _UNSET)
    if override is not _UNSET:
        return override  # type: ignore[return-value]
    try:
        profile = profile_for(_model_name())
    except Exception:
        return None
    return level_model_load(profile.name) if profile else None


_UNSET = object()
#: a model set in memory instead of the profile file (bench/quality.py fits before it writes)
_level_override: dict[str, object] = {}


def level_model_override(model: LevelModel | object | None = _UNSET) -> None:
    """Use ``model`` instead of the profile file (None: no model); no argument: the file again."""
    if model is _UNSET:
        _level_override.pop("model", None)
    else:
        _level_override["model"] = model
