"""Periodic upkeep run by Celery beat (CELERY_BEAT_SCHEDULE in config/settings/knowledge.py).

Thin: each calls a service of knowledge.services.maintenance and returns a summary for the log.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from knowledge.services.maintenance import documents_pending_requeue, index_check


@shared_task(name="knowledge.pending_documents_requeue")
def pending_documents_requeue() -> dict:
    """Every few minutes: queue documents left PENDING (broker down at upload, message lost)."""
    result = documents_pending_requeue()
    return {"queued": len(result.queued), "failed": len(result.failed)}


@shared_task(name="knowledge.index_check", acks_late=True)
def index_check_repair() -> dict:
    """Nightly: compare the database with Milvus and repair what differs."""
    report = index_check(repair=True)
    return {
        key: (len(value) if isinstance(value, list) else value) for key, value in report.as_dict().items()
    }


@shared_task(name="knowledge.sync_sources", acks_late=True)
def sync_sources() -> list[str]:
    """Every SYNC_INTERVAL_SECONDS: mirror each folder of SYNC_SOURCES (see knowledge.services.sync)."""
    from knowledge.services.sync import sync_sources_run

    reports = sync_sources_run(sources=settings.SYNC_SOURCES, prune=settings.SYNC_PRUNE)
    return [report.summary() for report in reports]
