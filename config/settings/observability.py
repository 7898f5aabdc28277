"""Observability: threshold calibration from feedback (seed 000 Phase 2) and the dashboards."""

import importlib.util

from django.core.exceptions import ImproperlyConfigured

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

# --- Metrics and traces (docs/operations.md, "Metrics and traces") -----------------------------
# The bearer token a Prometheus server scrapes GET /metrics with; empty: only staff signed in to
# the admin may read it. A token is a secret: at least 32 characters.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
if METRICS_TOKEN and len(METRICS_TOKEN) < 32:
    raise ImproperlyConfigured(
        f"METRICS_TOKEN must be at least 32 characters (got {len(METRICS_TOKEN)}): "
        "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    )
# The folder where every web worker writes its metrics, so a scrape of any worker adds them all
# up (prometheus_client's multiprocess mode; the library reads the variable itself, at import).
# Empty: each process keeps its own in memory (one uvicorn process, `make run`). gunicorn
# (config/gunicorn_conf.py) uses var/prometheus when it is empty.
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default="")
# The OTLP/HTTP collector lookups are traced to (a span per lookup and per stage); empty: no
# tracing, OpenTelemetry not even imported. The other OTEL_* variables are read by the exporter.
# OpenTelemetry is the optional extra [tracing] (pip install -e '.[tracing]'): installed, it is
# imported by redis-py in every process (about 45 ms a start), traced or not.
OTEL_EXPORTER_OTLP_ENDPOINT = env.str("OTEL_EXPORTER_OTLP_ENDPOINT", default="")
if OTEL_EXPORTER_OTLP_ENDPOINT:
    if not OTEL_EXPORTER_OTLP_ENDPOINT.startswith(("http://", "https://")):
        raise ImproperlyConfigured(
            f"OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s):// URL of an OTLP/HTTP collector "
            f"(e.g. http://127.0.0.1:4318); got {OTEL_EXPORTER_OTLP_ENDPOINT!r}"
        )
    try:
        _exporter = importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http")
    except ModuleNotFoundError:  # a parent package is missing
        _exporter = None
    if _exporter is None:
        raise ImproperlyConfigured(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
            "pip install -e '.[tracing]' (or unset it)"
        )
