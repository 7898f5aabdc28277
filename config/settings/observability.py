"""Observability: threshold calibration from feedback (seed 000 Phase 2) and the dashboards."""

from config.env import env

# Judgements (with an L1 similarity) needed before a threshold pair is suggested.
OBSERVABILITY_CALIBRATION_MIN_FEEDBACK = env.int("OBSERVABILITY_CALIBRATION_MIN_FEEDBACK", default=20)
# Share of helpful results required at and above the suggested HIGHLY_RELEVANT threshold.
OBSERVABILITY_CALIBRATION_TARGET_PRECISION = env.float(
    "OBSERVABILITY_CALIBRATION_TARGET_PRECISION", default=0.9
)
# Judgements required at and above a HIGHLY_RELEVANT candidate before it can be suggested.
OBSERVABILITY_CALIBRATION_MIN_BAND = env.int("OBSERVABILITY_CALIBRATION_MIN_BAND", default=5)
