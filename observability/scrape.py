"""GET /metrics: the Prometheus scrape (docs/operations.md, "Metrics and traces").

Two parts: what the processes recorded (``observability.prometheus``: this process's memory, or
every worker's files in ``PROMETHEUS_MULTIPROC_DIR``), and gauges read at scrape time from the
database and the broker, which are right whichever process asks: documents by status, the
ingest backlog, failed indexing, the Celery queue's length (Redis broker only), and the agents'
names for the ``agent`` label. A few indexed COUNT queries and one Redis round trip a scrape.

Who may scrape: a request with ``Authorization: Bearer <METRICS_TOKEN>`` (when the setting is
set), or staff signed in to the admin. Anything else is refused (401 without credentials, 403
with wrong ones) and sees no metric; a tool token is not a scrape token.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Iterator

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from knowledge.models import ApiDocument

# Imported for its side effect: the recorded metrics exist (and are exposed, at zero) even in a
# process that has not recorded anything yet.
from observability import prometheus as _recorded  # noqa: F401

logger = logging.getLogger(__name__)

# kombu's Redis transport keeps a queue's messages of priority p > 0 in "<queue>\x06\x16<p>"
# (its default priority steps 0, 3, 6, 9); priority 0 in "<queue>" itself.
_KOMBU_PRIORITY_SEP = "\x06\x16"
_KOMBU_PRIORITIES = (0, 3, 6, 9)


def _kombu_keys(queue: str) -> list[str]:
    return [queue if p == 0 else f"{queue}{_KOMBU_PRIORITY_SEP}{p}" for p in _KOMBU_PRIORITIES]


class DatabaseCollector(Collector):
    """Gauges computed at scrape time; the database is the truth for them in every process."""

    def collect(self) -> Iterator[Metric]:
        counts = dict(ApiDocument.objects.values_list("status").annotate(n=Count("id")).order_by())
        documents = GaugeMetricFamily("agentkb_documents", "Documents by indexing status.", labels=["status"])
        for status in ApiDocument.Status.values:
            documents.add_metric([status], counts.get(status, 0))
        yield documents

        backlog = counts.get(ApiDocument.Status.PENDING, 0) + counts.get(ApiDocument.Status.INDEXING, 0)
        yield GaugeMetricFamily(
            "agentkb_ingest_queue_documents",
            "Documents waiting for or being indexed (PENDING + INDEXING).",
            value=backlog,
        )

        failed = ApiDocument.objects.filter(status=ApiDocument.Status.FAILED).aggregate(
            serving=Count("id", filter=Q(indexed_at__isnull=False)), total=Count("id")
        )
        failures = GaugeMetricFamily(
            "agentkb_indexing_failed_documents",
            "Documents whose last indexing failed; previous_version_served=true: an earlier "
            "indexed version still answers lookups, false: the document is not searchable.",
            labels=["previous_version_served"],
        )
        failures.add_metric(["true"], failed["serving"] or 0)
        failures.add_metric(["false"], (failed["total"] or 0) - (failed["serving"] or 0))
        yield failures

        agents = GaugeMetricFamily(
            "agentkb_agent_info",
            "1 per active user, naming the agent label of agentkb_lookups_total (the user id).",
            labels=["agent", "name"],
        )
        user_model = get_user_model()
        for pk, name in user_model.objects.filter(is_active=True).values_list(
            "pk", user_model.USERNAME_FIELD
        ):
            agents.add_metric([str(pk), str(name)], 1)
        yield agents

        queued = celery_queue_length()
        if queued is not None:
            yield _celery_family(queued)


def _celery_family(queued: tuple[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "agentkb_celery_queue_messages",
        "Tasks waiting in the Celery queue on the Redis broker (not those a worker holds).",
        labels=["queue"],
    )
    family.add_metric([queued[0]], queued[1])
    return family


def celery_queue_length() -> tuple[str, int] | None:
    """(queue, messages waiting) when the broker is Redis: one pipelined round trip with a short
    deadline. None with another broker, or when Redis does not answer (logged)."""
    url = str(settings.CELERY_BROKER_URL or "")
    if not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    try:
        pipe = client.pipeline(transaction=False)
        for key in _kombu_keys(queue):
            pipe.llen(key)
        return queue, sum(pipe.execute())
    except redis.RedisError as exc:
        logger.warning("celery queue length not read: %s", exc)
        return None
    finally:
        client.close()


def metrics_text() -> bytes:
    """The whole scrape in Prometheus's text format."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if folder:
        recorded = CollectorRegistry()
        MultiProcessCollector(recorded, path=folder)
    else:
        recorded = REGISTRY
    computed = CollectorRegistry()
    computed.register(DatabaseCollector())
    return generate_latest(recorded) + generate_latest(computed)


def scrape_allowed(request: HttpRequest) -> int:
    """200 when the request may scrape; else the status to refuse it with (401 no credentials,
    403 wrong ones)."""
    header = request.headers.get("Authorization", "")
    scheme, _, presented = header.partition(" ")
    if header:
        token = settings.METRICS_TOKEN
        if scheme.lower() == "bearer" and token and hmac.compare_digest(presented.strip(), token):
            return 200
        return 403
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return 200 if (user.is_active and user.is_staff) else 403
    return 401


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    allowed = scrape_allowed(request)
    if allowed != 200:
        response = HttpResponse(
            "metrics: a staff session or Authorization: Bearer <METRICS_TOKEN> is required\n",
            status=allowed,
            content_type="text/plain; charset=utf-8",
        )
        if allowed == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
