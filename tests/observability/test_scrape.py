"""GET /metrics: who may scrape it, the gauges read from the database at scrape time, and the
counts of several processes added up (prometheus_client's multiprocess mode, as under gunicorn)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from knowledge.models import ApiDocument
from retrieval.agents.tokens import tool_token_issue
from tests.conftest import REPO

pytestmark = pytest.mark.django_db

SCRAPE_TOKEN = "t" * 40


def _families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


# --- who may scrape ------------------------------------------------------------------------------
def test_an_unauthenticated_scrape_is_refused_and_shows_no_metric(settings):
    settings.METRICS_TOKEN = SCRAPE_TOKEN
    response = Client().get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"agentkb_" not in response.content


def test_a_tool_token_cannot_scrape(settings):
    settings.METRICS_TOKEN = SCRAPE_TOKEN
    key = tool_token_issue(name="curious-agent").key
    for header in (f"Bearer {key}", f"Token {key}"):
        response = Client().get("/metrics", HTTP_AUTHORIZATION=header)
        assert response.status_code == 403, header
        assert b"agentkb_" not in response.content


def test_a_wrong_token_is_refused_and_without_a_setting_no_token_opens_it(settings):
    settings.METRICS_TOKEN = SCRAPE_TOKEN
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {SCRAPE_TOKEN}x").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Basic {SCRAPE_TOKEN}").status_code == 403
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_staff_signed_in_may_scrape_and_other_users_may_not(admin_client, django_user_model, settings):
    settings.METRICS_TOKEN = ""
    response = admin_client.get("/metrics")
    assert response.status_code == 200
    assert "agentkb_documents" in _families(response.content.decode())
    plain = Client()
    plain.force_login(django_user_model.objects.create_user(username="not-staff", password="x" * 12))
    assert plain.get("/metrics").status_code == 403


def test_a_short_scrape_token_stops_start_up():
    from tests.support.settings_start import django_setup

    done = django_setup({"METRICS_TOKEN": "short"})
    assert done.returncode != 0 and "METRICS_TOKEN must be at least 32 characters" in done.stderr


# --- gauges read at scrape time ------------------------------------------------------------------
def _document(key: str, status: str, *, indexed: bool = False) -> None:
    from django.utils import timezone

    ApiDocument.objects.create(
        doc_key=key,
        title=key,
        domain="ops",
        content="x",
        content_hash=key,
        status=status,
        indexed_at=timezone.now() if indexed else None,
    )


def test_documents_by_status_the_ingest_backlog_and_failed_indexing(admin_client, settings):
    settings.CELERY_BROKER_URL = "filesystem://localhost/"  # the embedded default's broker
    S = ApiDocument.Status
    for key, status, indexed in [
        ("a", S.PENDING, False),
        ("b", S.PENDING, False),
        ("c", S.INDEXING, True),
        ("d", S.INDEXED, True),
        ("e", S.FAILED, True),
        ("f", S.FAILED, False),
        ("g", S.FAILED, False),
    ]:
        _document(key, status, indexed=indexed)
    families = _families(admin_client.get("/metrics").content.decode())
    by_status = {s.labels["status"]: s.value for s in families["agentkb_documents"].samples}
    assert by_status == {"PENDING": 2, "INDEXING": 1, "INDEXED": 1, "FAILED": 3}
    assert families["agentkb_ingest_queue_documents"].samples[0].value == 3
    failed = {
        s.labels["previous_version_served"]: s.value
        for s in families["agentkb_indexing_failed_documents"].samples
    }
    assert failed == {"true": 1, "false": 2}
    # The filesystem broker has no cheap queue length: none is claimed.
    assert "agentkb_celery_queue_messages" not in families


@pytest.mark.services
def test_the_celery_queue_length_is_read_from_a_redis_broker(settings, admin_client):
    import redis

    settings.CELERY_BROKER_URL = os.environ["REDIS_URL"]
    settings.CELERY_TASK_DEFAULT_QUEUE = queue = f"metrics-test-{os.getpid()}"
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        client.rpush(queue, "m1", "m2")
        client.rpush(f"{queue}\x06\x163", "m3")  # kombu's list of priority 3
        families = _families(admin_client.get("/metrics").content.decode())
        (sample,) = families["agentkb_celery_queue_messages"].samples
        assert sample.labels == {"queue": queue} and sample.value == 3
    finally:
        client.delete(queue, f"{queue}\x06\x163")
        client.close()


# --- several processes ---------------------------------------------------------------------------
_RECORD = textwrap.dedent(
    """
    import django
    django.setup()
    from observability.prometheus import budget_refusal_count, lookup_count, stage_observe
    for _ in range({n}):
        lookup_count(tool="lookup_knowledge", level="PRECISE", dedup_reason=None, status="SUCCESS",
                     agent_id=7, duration_ms=12)
        stage_observe("candidates:l1", 0.004)
    budget_refusal_count("tool")
    """
)


def test_counts_of_several_processes_add_up_in_multiprocess_mode(tmp_path, monkeypatch, admin_client):
    folder = tmp_path / "prometheus"
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
    }
    workers = [
        subprocess.Popen([sys.executable, "-c", _RECORD.format(n=n)], cwd=REPO, env=env) for n in (3, 5)
    ]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0]

    # Any worker's scrape reads every worker's files (this process stands for the scraping one).
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(folder))
    families = _families(admin_client.get("/metrics").content.decode())
    lookups = {
        tuple(sorted(s.labels.items())): s.value
        for s in families["agentkb_lookups"].samples
        if s.name == "agentkb_lookups_total"
    }
    key = (
        ("agent", "7"),
        ("dedup_reason", "none"),
        ("level", "PRECISE"),
        ("status", "SUCCESS"),
        ("tool", "lookup_knowledge"),
    )
    assert lookups == {key: 8}
    stage = {
        s.labels["le"]: s.value
        for s in families["agentkb_lookup_stage_seconds"].samples
        if s.name.endswith("_bucket") and s.labels["stage"] == "candidates:l1"
    }
    assert stage["0.0025"] == 0 and stage["0.005"] == 8 and stage["+Inf"] == 8
    (refusals,) = [s for s in families["agentkb_budget_refusals"].samples if s.name.endswith("_total")]
    assert refusals.value == 2
    # The database gauges are there too, from the scraping process.
    assert "agentkb_documents" in families
