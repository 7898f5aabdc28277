"""Domain-map tasks: fill a document's covers / when_to_retrieve, regenerate a domain's summary.

Thin: they take ids, call a service, and retry with backoff only when the LLM endpoint is
temporarily unavailable (LLMUnavailable). After LLM_TASK_RETRIES they give up and record it:
a document falls back to the extractive summary, a domain keeps its previous summary.

The two tasks that call the LLM go to the summaries queue (``summaries_queue``, routed by
``config.queueing.task_route``), hold one of ``LLM_TASK_SLOTS`` slots while they run (every slot
taken: queued again a little later, without calling the LLM), and have time limits derived from
``LLM_TIMEOUT``: a hung endpoint holds a bounded number of worker processes for a bounded time,
and indexing keeps the rest.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready
from django.conf import settings

from knowledge.llm import LLMUnavailable
from knowledge.services.document_metadata import document_summary_fill
from knowledge.services.domains import (
    Outcome,
    domain_summary_failure_record,
    domain_summary_regenerate,
    domains_missing_summary_queue,
)
from knowledge.services.locks import llm_slot

logger = logging.getLogger(__name__)


#: Options of the tasks that call the LLM: their queue and their time limits.
LLM_TASK_OPTIONS = {
    "summaries_queue": True,
    "soft_time_limit": settings.LLM_TASK_SOFT_TIME_LIMIT,
    "time_limit": settings.LLM_TASK_TIME_LIMIT,
}

#: Past the soft time limit the endpoint is treated as unavailable: retried later, then given up.
LLM_TEMPORARY = (LLMUnavailable, SoftTimeLimitExceeded)


def _backoff(retries: int) -> float:
    return float(settings.LLM_TASK_RETRY_BACKOFF) * (2**retries)


@contextlib.contextmanager
def _llm_slot_or_later(task: Task) -> Iterator[bool]:
    """Hold an LLM slot for the block (yields True), or queue the same call again
    ``LLM_SLOT_WAIT_SECONDS`` later with the same retry count and yield False. In process (eager)
    there is no cap: the caller is waiting, and a nested task would find its parent's slot."""
    if task.request.is_eager:
        yield True
        return
    with llm_slot(slots=int(settings.LLM_TASK_SLOTS)) as free:
        if not free:
            task.apply_async(
                task.request.args,
                task.request.kwargs,
                countdown=float(settings.LLM_SLOT_WAIT_SECONDS),
                retries=task.request.retries,
            )
        yield free


# Named explicitly, as Celery named them by default (module path + function): services queue
# them by these names (config.queueing), and the names must not move with the module.
@shared_task(
    bind=True,
    name="knowledge.tasks.domains.document_summary_fill_task",
    max_retries=None,
    acks_late=True,
    **LLM_TASK_OPTIONS,
)
def document_summary_fill_task(self, document_id: int) -> list[str]:
    with _llm_slot_or_later(self) as free:
        return _document_summary_fill(self, document_id) if free else []


def _document_summary_fill(self, document_id: int) -> list[str]:
    try:
        return document_summary_fill(document_id=document_id)
    except LLM_TEMPORARY as exc:
        if self.request.retries >= settings.LLM_TASK_RETRIES:
            logger.warning(
                "document %s: LLM still unavailable, extractive summary used: %s", document_id, exc
            )
            return document_summary_fill(document_id=document_id, llm_failure=str(exc))
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


@shared_task(
    bind=True,
    name="knowledge.tasks.domains.domain_summary_regenerate_task",
    max_retries=None,
    acks_late=True,
    **LLM_TASK_OPTIONS,
)
def domain_summary_regenerate_task(self, domain_id: str, seq: int | None = None) -> str:
    """``seq``: the change this run was queued for (None = regenerate now, whatever changed)."""
    with _llm_slot_or_later(self) as free:
        return _domain_summary_regenerate(self, domain_id, seq) if free else "waiting for an LLM slot"


def _domain_summary_regenerate(self, domain_id: str, seq: int | None) -> str:
    try:
        outcome = domain_summary_regenerate(domain_id=domain_id, expected_seq=seq)
    except LLM_TEMPORARY as exc:
        retries = self.request.retries
        if retries >= settings.LLM_TASK_RETRIES:
            domain_summary_failure_record(domain_id=domain_id, error=str(exc), final=True)
            return Outcome.FAILED.value
        countdown = _backoff(retries)
        domain_summary_failure_record(domain_id=domain_id, error=str(exc), final=False, retry_in=countdown)
        raise self.retry(exc=exc, countdown=countdown) from exc
    if outcome is Outcome.BUSY and not self.request.is_eager:
        # Another regeneration of this domain is running: try again after it, same seq (it exits
        # if a newer change arrives meanwhile). Eagerly this would recurse, so it stops there.
        domain_summary_regenerate_task.apply_async(
            (domain_id, seq), countdown=max(float(settings.DOMAIN_SUMMARY_DEBOUNCE_SECONDS), 1.0)
        )
    return outcome.value


@shared_task
def domains_missing_summary_queue_task() -> list[str]:
    return domains_missing_summary_queue()


@worker_ready.connect
def _queue_missing_domain_summaries(sender=None, **kwargs) -> None:
    """At worker start (the seeds' loadIndex): queue domains with documents but no guidance."""
    try:
        missing = domains_missing_summary_queue()
    except Exception:  # a worker must start even if the database is not there yet
        logger.exception("could not check domains for missing summaries at start-up")
        return
    if missing:
        logger.info("queued summary regeneration for domains without one: %s", ", ".join(missing))
