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

# Hourly: roll up the tool invocations of days that ended (observability/tasks.py), so dashboards
# over long ranges read a few rows per day. Run by the worker's beat (`make run` starts it).
CELERY_BEAT_SCHEDULE = {
    "observability-invocation-rollups": {
        "task": "observability.invocation_rollups_build",
        "schedule": 60 * 60,
    },
}
