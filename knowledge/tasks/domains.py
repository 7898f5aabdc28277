"""Domain-map tasks: fill a document's covers / when_to_retrieve, regenerate a domain's summary.

Thin: they take ids, call a service, and retry with backoff only when the LLM endpoint is
temporarily unavailable (LLMUnavailable). After LLM_TASK_RETRIES they give up and record it:
a document falls back to the extractive summary, a domain keeps its previous summary.

The tasks that call the LLM go to the summaries queue (``summaries_queue``, routed by
``config.queueing.task_route``), hold one of ``LLM_TASK_SLOTS`` slots while they run (every slot
taken: queued again a little later, without calling the LLM), and have time limits derived from
``LLM_TIMEOUT``: a hung endpoint holds a bounded number of worker processes for a bounded time,
and indexing keeps the rest.
"""

from __future__ import annotations

import contextlib
import logging
import time
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
    """One document's summaries. Indexing queues ``documents_summary_fill_task`` instead; this
    task stays registered for the messages an earlier version queued."""
    with _llm_slot_or_later(self) as free:
        return _document_summary_fill(self, document_id) if free else []


@shared_task(
    bind=True,
    name="knowledge.tasks.domains.documents_summary_fill_task",
    max_retries=None,
    acks_late=True,
    **LLM_TASK_OPTIONS,
)
def documents_summary_fill_task(self, document_ids: list[int]) -> dict[str, list[str]]:
    """Fill the summaries of ``document_ids`` (an indexing batch's share) in turn under one LLM
    slot: one message for the share, not one a document. Returns the keys written by document id.

    A task keeps to its time limits: it starts a further document only while a document's worst
    case (two calls of ``LLM_TIMEOUT``) still fits before its soft time limit, and queues the rest
    as a task of its own. The LLM unavailable: the task retries from the document that failed
    (``LLM_TASK_RETRIES`` times, backing off), and a task that had filled some first queues the
    rest afresh, their retries unspent. Once a document has gone through every retry (the
    endpoint down all along), it gets the extractive summary, and so does each document after it
    whose call fails: they do not wait through a retry schedule each.
    """
    with _llm_slot_or_later(self) as free:
        return _documents_summary_fill(self, [int(i) for i in document_ids]) if free else {}


def _documents_summary_fill(self, document_ids: list[int]) -> dict[str, list[str]]:
    started = time.monotonic()
    room = float(settings.LLM_TASK_SOFT_TIME_LIMIT) - 2 * float(settings.LLM_TIMEOUT)
    filled: dict[str, list[str]] = {}
    given_up = self.request.retries >= settings.LLM_TASK_RETRIES
    for position, document_id in enumerate(document_ids):
        rest = document_ids[position:]
        if position and time.monotonic() - started > room:  # the rest in a task of its own
            self.apply_async((rest,), retries=self.request.retries if given_up else 0)
            return filled
        try:
            filled[str(document_id)] = document_summary_fill(document_id=document_id)
        except LLM_TEMPORARY as exc:
            if given_up:
                logger.warning(
                    "document %s: LLM still unavailable, extractive summary used: %s", document_id, exc
                )
                filled[str(document_id)] = document_summary_fill(
                    document_id=document_id, llm_failure=str(exc)
                )
            elif position:  # some were filled: the rest start afresh, after the first backoff
                self.apply_async((rest,), countdown=_backoff(0))
                return filled
            else:
                raise self.retry(args=(rest,), exc=exc, countdown=_backoff(self.request.retries)) from exc
        except Exception:
            # One document's fault (its row, its text): logged, and the rest of the share filled
            # all the same, as when each document had a task of its own.
            logger.exception("filling the summaries of document %s failed", document_id)
    return filled


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
