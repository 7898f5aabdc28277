"""The level model: the probability that a candidate answers the query, from evidence that
transfers between corpora, and the relevance level as a band of that probability.

An estimate is a logistic regression over the features of ``retrieval.lookup.level_features``,
then isotonic calibration (piecewise linear between the fitted breakpoints). The levels are bands
of the calibrated estimate: PRECISE >= 0.99, HIGHLY_RELEVANT >= 0.95, REFERENCE >= 0.80, below
that not found. Fixed similarity thresholds did not hold on a set they were not fitted on
(CMRC2018 -> DRCD: unanswerable not-found 0.553); bands of a calibrated estimate did (0.863).

The fitted model is a versioned JSON profile per embedding model in ``level_profiles/``
(coefficients, breakpoints, features, fit data set, date, the cross table): no pickles, nothing
executable. ``bench/quality.py --fit-on`` and ``manage.py calibrate_thresholds`` write it.
``RETRIEVAL_LEVELS=thresholds`` keeps the seeds' FS-1/FS-2 rule instead.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from observability.records import RelevanceLevel

PROFILE_FORMAT = 1
PROFILES_DIR = Path(__file__).resolve().parent / "level_profiles"
#: the bands of the estimate, strongest first
BANDS: tuple[tuple[float, RelevanceLevel], ...] = (
    (0.99, RelevanceLevel.PRECISE),
    (0.95, RelevanceLevel.HIGHLY_RELEVANT),
    (0.80, RelevanceLevel.REFERENCE),
)
FOUND_AT = BANDS[-1][0]


@dataclass(frozen=True)
class LevelModel:
    name: str
    features: tuple[str, ...]
    coefficients: tuple[float, ...]
    intercept: float
    #: isotonic calibration: the raw estimate's breakpoints and the calibrated values there
    iso_x: tuple[float, ...]
    iso_y: tuple[float, ...]
    #: hybrid fusion's dense weight chosen on the fit set (None: the settings' ranker)
    dense_weight: float | None = None
    #: data set, date, figures: what a reader needs to trust it
    fitted: dict[str, Any] = field(default_factory=dict)

    def raw(self, features: dict[str, float]) -> float:
        z = self.intercept + sum(
            c * float(features.get(f, 0.0)) for f, c in zip(self.features, self.coefficients, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def estimate(self, features: dict[str, float]) -> float:
        """The calibrated probability that the candidate with these features answers."""
        return _interpolate(self.raw(features), self.iso_x, self.iso_y)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT,
            "name": self.name,
            "features": list(self.features),
            "coefficients": list(self.coefficients),
            "intercept": self.intercept,
            "isotonic": {"x": list(self.iso_x), "y": list(self.iso_y)},
            "dense_weight": self.dense_weight,
            "fitted": self.fitted,
        }


def _interpolate(x: float, xs: tuple[float, ...], ys: tuple[float, ...]) -> float:
    if not xs:
        return x
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    lo, hi = 0, len(xs) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xs[mid] <= x:
            lo = mid
        else:
            hi = mid
    span = xs[hi] - xs[lo]
    t = 0.0 if span <= 0 else (x - xs[lo]) / span
    return ys[lo] + t * (ys[hi] - ys[lo])


def band(estimate: float | None) -> RelevanceLevel | None:
    """The level of an estimate; None below REFERENCE's band (not found)."""
    if estimate is None:
        return None
    for floor, level in BANDS:
        if estimate >= floor:
            return level
    return None


def model_from_json(data: dict[str, Any], *, source: str = "profile") -> LevelModel:
    """A model from its JSON profile; ValueError naming the field at fault."""
    if data.get("format") != PROFILE_FORMAT:
        raise ValueError(f"{source}: format must be {PROFILE_FORMAT}; got {data.get('format')!r}")
    features = tuple(str(f) for f in data.get("features") or ())
    coefficients = tuple(float(c) for c in data.get("coefficients") or ())
    if not features or len(features) != len(coefficients):
        raise ValueError(f"{source}: features and coefficients must be non-empty and of one length")
    iso = data.get("isotonic") or {}
    xs, ys = tuple(float(v) for v in iso.get("x", ())), tuple(float(v) for v in iso.get("y", ()))
    if len(xs) != len(ys) or list(xs) != sorted(xs) or list(ys) != sorted(ys):
        raise ValueError(f"{source}: isotonic.x and isotonic.y must be ascending and of one length")
    weight = data.get("dense_weight")
    return LevelModel(
        name=str(data.get("name") or ""),
        features=features,
        coefficients=coefficients,
        intercept=float(data.get("intercept", 0.0)),
        iso_x=xs,
        iso_y=ys,
        dense_weight=None if weight is None else float(weight),
        fitted=dict(data.get("fitted") or {}),
    )


def profile_path(profile_name: str) -> Path:
    return PROFILES_DIR / f"{profile_name}.json"


@functools.lru_cache(maxsize=8)
def level_model_load(profile_name: str) -> LevelModel | None:
    """The level model fitted for the embedding profile ``profile_name``; None when it has none."""
    path = profile_path(profile_name)
    if not path.exists():
        return None
    return model_from_json(json.loads(path.read_text(encoding="utf-8")), source=str(path))


def level_model_save(model: LevelModel, path: Path | None = None) -> Path:
    """Write the profile whole or not at all (a temporary file renamed over it)."""
    path = path or profile_path(model.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(model.as_json(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    level_model_load.cache_clear()
    return path
