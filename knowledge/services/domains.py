"""Knowledge domains: the knowledge_domain rows that aggregate a domain's documents (seed 004).

Flow (seed 004 Part B, "注入链路"):

    document indexed ──> document_metadata.document_indexed() ──> covers / when_to_retrieve filled
                                                      │
    upload, re-upload, delete, metadata edit ──> domain_documents_changed()
        bumps change_seq, queues domain_summary_regenerate_task(seq) with countdown = window
                                                      │  (after DOMAIN_SUMMARY_DEBOUNCE_SECONDS)
    domain_summary_regenerate(expected_seq=seq): exits if a newer change arrived (its own task
    will run), else takes the domain's lock, asks the LLM (or the extractive summariser) and
    writes when_to_retrieve / description / document_count.

So a burst of uploads into one domain costs one LLM call, and two regenerations of one domain
never interleave (Redis lock when Redis is configured, a lease on the row otherwise).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterable, Iterator
from datetime import timedelta
from enum import StrEnum

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from config.credentials import mask_credentials
from config.queueing import task_queue_on_commit
from knowledge.llm import LLMError, LLMUnavailable, get_llm_client
from knowledge.models import ApiDocument, KnowledgeDomain
from knowledge.selectors import domain_ids_with_documents
from knowledge.summaries import (
    INVALID_OUTPUT_ATTEMPTS,
    DomainDocument,
    DomainSummary,
    extractive_domain_summary,
    llm_domain_summary,
)

logger = logging.getLogger(__name__)

#: knowledge.tasks.domains.domain_summary_regenerate_task, queued by name (config.queueing).
REGENERATE_TASK = "knowledge.tasks.domains.domain_summary_regenerate_task"

Source = KnowledgeDomain.SummarySource
State = KnowledgeDomain.SummaryState


class Outcome(StrEnum):
    REGENERATED = "regenerated"
    SUPERSEDED = "superseded"  # a newer change arrived inside the window: its task will run
    BUSY = "busy"  # another regeneration of this domain holds the lock
    FAILED = "failed"  # the LLM refused for good; previous summary kept


@transaction.atomic
def domain_document_count_refresh(*, domain_id: str) -> KnowledgeDomain:
    """Create the domain row if needed and set document_count from api_document."""
    domain, _ = KnowledgeDomain.objects.select_for_update().get_or_create(domain_id=domain_id)
    domain.document_count = ApiDocument.objects.filter(domain=domain_id).count()
    domain.save()
    return domain


@transaction.atomic
def domain_documents_changed(*, domain_id: str) -> KnowledgeDomain:
    """Call after any change to a domain's documents (upload, re-upload, delete, metadata edit).

    Refreshes document_count and queues a debounced regeneration of the domain's
    when_to_retrieve (sent after commit, DOMAIN_SUMMARY_DEBOUNCE_SECONDS later).
    """
    domain = domain_document_count_refresh(domain_id=domain_id)
    return _regeneration_request(domain=domain, countdown=_debounced_countdown(domain))


def domains_documents_changed(*, domain_ids: Iterable[str]) -> None:
    """``domain_documents_changed`` for each domain, once each (a bulk ingest, an indexing batch).

    Called after the changes committed: a domain whose refresh fails is logged and the others go
    on; its next change (its documents' indexing reports one) redoes it."""
    for domain_id in dict.fromkeys(d for d in domain_ids if d):
        try:
            domain_documents_changed(domain_id=domain_id)
        except Exception:
            logger.exception("could not refresh domain %s after its documents changed", domain_id)


def _debounced_countdown(domain: KnowledgeDomain) -> float:
    """The debounce window, cut short so the regeneration runs at most
    DOMAIN_SUMMARY_MAX_DELAY_SECONDS after the oldest change still waiting for one."""
    window = float(settings.DOMAIN_SUMMARY_DEBOUNCE_SECONDS)
    if domain.dirty_since is None:
        return window
    waited = (timezone.now() - domain.dirty_since).total_seconds()
    return max(0.0, min(window, float(settings.DOMAIN_SUMMARY_MAX_DELAY_SECONDS) - waited))


@transaction.atomic
def domain_summary_request(*, domain_id: str, countdown: float | None = None) -> KnowledgeDomain:
    """Queue a regeneration of ``domain_id`` (debounced like a change; ``countdown`` 0 = now)."""
    domain = domain_document_count_refresh(domain_id=domain_id)
    if countdown is None:
        countdown = settings.DOMAIN_SUMMARY_DEBOUNCE_SECONDS
    return _regeneration_request(domain=domain, countdown=countdown)


def _regeneration_request(*, domain: KnowledgeDomain, countdown: float) -> KnowledgeDomain:
    # The row is locked (select_for_update in domain_document_count_refresh): every caller gets
    # its own seq, so exactly one queued task (the last) finds its seq current.
    domain.change_seq += 1
    domain.dirty_since = domain.dirty_since or timezone.now()
    domain.summary_state = State.PENDING
    domain.save()
    domain_id = domain.domain_id
    # The change itself is committed; the domain stays marked dirty and the next worker start
    # (or `regenerate_domains`) queues it. An upload must not fail over this.
    task_queue_on_commit(
        REGENERATE_TASK,
        args=(domain_id, domain.change_seq),
        countdown=max(countdown, 0),
        on_error=lambda _exc: logger.exception(
            "could not queue the summary regeneration of domain %s", domain_id
        ),
    )
    return domain


# --- Regeneration ------------------------------------------------------------------------------


def _lock_ttl() -> float:
    # Longest a regeneration can take: every attempt timing out after the client's retries.
    return settings.LLM_TIMEOUT * (settings.LLM_MAX_RETRIES + 1) * INVALID_OUTPUT_ATTEMPTS + 60


@contextlib.contextmanager
def domain_regeneration_lock(*, domain_id: str) -> Iterator[bool]:
    """Yields True when this process holds the domain's regeneration lock, False when another does.

    Redis lock when Redis is configured (shared by every worker), else a lease on the
    knowledge_domain row taken by a conditional UPDATE (atomic on SQLite and MySQL alike, and it
    expires if the holder dies). The caller must not wait: it re-queues instead.
    """
    ttl = _lock_ttl()
    if settings.REDIS_URL:
        from django_redis import get_redis_connection
        from redis.exceptions import LockError

        # Named after the database too: deployments (and test runs) sharing one Redis stay apart.
        name = f"agentkb:domain-summary-lock:{connection.settings_dict['NAME']}:{domain_id}"
        lock = get_redis_connection("default").lock(name, timeout=ttl)
        acquired = lock.acquire(blocking=False)
        try:
            yield acquired
        finally:
            if acquired:
                with contextlib.suppress(LockError):
                    lock.release()
        return

    KnowledgeDomain.objects.get_or_create(domain_id=domain_id)
    token = uuid.uuid4().hex
    now = timezone.now()
    acquired = bool(
        KnowledgeDomain.objects.filter(domain_id=domain_id)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .update(lock_token=token, locked_until=now + timedelta(seconds=ttl))
    )
    try:
        yield acquired
    finally:
        if acquired:
            KnowledgeDomain.objects.filter(domain_id=domain_id, lock_token=token).update(
                lock_token="", locked_until=None
            )


def domain_documents_for_summary(*, domain_id: str) -> list[DomainDocument]:
    """The INDEXED documents of a domain with their covers / when_to_retrieve, by title."""
    rows = (
        ApiDocument.objects.filter(domain=domain_id, status=ApiDocument.Status.INDEXED)
        .order_by("title", "doc_key")
        .values_list("title", "metadata")
    )
    documents = []
    for title, metadata in rows:
        metadata = metadata or {}
        covers = metadata.get("covers") or []
        documents.append(
            DomainDocument(
                title=title,
                covers=[str(c) for c in covers] if isinstance(covers, list) else [str(covers)],
                when_to_retrieve=str(metadata.get("when_to_retrieve") or ""),
            )
        )
    return documents


def domain_summary_regenerate(*, domain_id: str, expected_seq: int | None = None) -> Outcome:
    """Regenerate a domain's when_to_retrieve (and description when empty) from its documents.

    ``expected_seq``: the change this run was queued for; if a newer change arrived the run
    exits (SUPERSEDED). None forces a run ("regenerate now", the command).
    Raises LLMUnavailable when the endpoint is down (the caller retries later); the previous
    summary stays either way. A staff-written ("manual") when_to_retrieve is never replaced.
    """
    if expected_seq is not None:
        current = (
            KnowledgeDomain.objects.filter(domain_id=domain_id).values_list("change_seq", flat=True).first()
        )
        if current != expected_seq:
            return Outcome.SUPERSEDED

    with domain_regeneration_lock(domain_id=domain_id) as acquired:
        if not acquired:
            return Outcome.BUSY
        KnowledgeDomain.objects.get_or_create(domain_id=domain_id)
        started_at = timezone.now()
        # Read the seq now: a change that lands while the LLM thinks leaves the domain dirty.
        seq_at_start = (
            KnowledgeDomain.objects.filter(domain_id=domain_id).values_list("change_seq", flat=True).first()
        )
        KnowledgeDomain.objects.filter(domain_id=domain_id).update(summary_state=State.RUNNING)
        domain = KnowledgeDomain.objects.get(domain_id=domain_id)
        documents = domain_documents_for_summary(domain_id=domain_id)
        manual = domain.summary_source == Source.MANUAL
        client = get_llm_client()

        if not documents:
            summary = DomainSummary(when_to_retrieve="", description="", source="", reason="")
        elif (manual and domain.description) or client is None:
            # Nothing for the LLM to write (manual guidance, description set), or no LLM at all.
            summary = extractive_domain_summary(domain_id=domain_id, documents=documents)
        else:
            try:
                summary = llm_domain_summary(client=client, domain_id=domain_id, documents=documents)
            except LLMUnavailable:
                raise
            except LLMError as exc:
                domain_summary_failure_record(domain_id=domain_id, error=str(exc), final=True)
                return Outcome.FAILED
            if summary.source != Source.LLM and summary.reason and domain.when_to_retrieve and not manual:
                # The LLM answered, but not what was asked, even when asked again: the previous
                # summary stays (as when it is down); the extractive one only fills an empty map.
                domain_summary_failure_record(domain_id=domain_id, error=summary.reason, final=True)
                return Outcome.FAILED
        _summary_store(
            domain_id=domain_id,
            summary=summary,
            seq_at_start=seq_at_start,
            has_documents=bool(documents),
            started_at=started_at,
        )
    return Outcome.REGENERATED


@transaction.atomic
def _summary_store(
    *, domain_id: str, summary: DomainSummary, seq_at_start: int | None, has_documents: bool, started_at
) -> None:
    domain = KnowledgeDomain.objects.select_for_update().get(domain_id=domain_id)
    if domain.summary_source != Source.MANUAL:
        domain.when_to_retrieve = summary.when_to_retrieve
        domain.summary_source = summary.source if has_documents else ""
    if not domain.description and summary.description:
        domain.description = summary.description
    domain.document_count = ApiDocument.objects.filter(domain=domain_id).count()
    domain.last_regenerated_at = timezone.now()
    domain.last_error = summary.reason
    if domain.change_seq == seq_at_start:
        domain.dirty_since = None
        domain.summary_state = State.OK
    else:
        # Changed while we worked: that change's task is queued and will run after us. Only the
        # changes since this run started are waiting now (what the maximum delay counts from).
        domain.dirty_since = started_at
        domain.summary_state = State.PENDING
    domain.save()


@transaction.atomic
def domain_summary_failure_record(
    *, domain_id: str, error: str, final: bool, retry_in: float | None = None
) -> None:
    """Record an LLM failure on the domain: the error shows in the admin, the summary stays.

    On the final failure of a domain that has no guidance at all yet, the extractive summary is
    written so the planner's map is never empty for a domain with documents.
    """
    domain = KnowledgeDomain.objects.select_for_update().filter(domain_id=domain_id).first()
    if domain is None:
        return
    error = mask_credentials(error)  # the admin shows it: an endpoint's URL may carry a key
    if final:
        domain.last_error = f"LLM failed, previous summary kept: {error}"
        domain.summary_state = State.FAILED
        if not domain.when_to_retrieve and domain.summary_source != Source.MANUAL:
            documents = domain_documents_for_summary(domain_id=domain_id)
            if documents:
                fallback = extractive_domain_summary(domain_id=domain_id, documents=documents)
                domain.when_to_retrieve = fallback.when_to_retrieve
                domain.summary_source = Source.EXTRACTIVE
                domain.description = domain.description or fallback.description
                domain.last_regenerated_at = timezone.now()
                domain.last_error = f"LLM failed, extractive summary written: {error}"
    else:
        wait = f" (retrying in {retry_in:.0f} s)" if retry_in is not None else ""
        domain.last_error = f"LLM unavailable{wait}: {error}"
        domain.summary_state = State.PENDING
    domain.save()
    logger.warning("domain %s summary: %s", domain_id, domain.last_error)


@transaction.atomic
def domain_guidance_update(
    *, domain: KnowledgeDomain, when_to_retrieve: str | None, description: str | None
) -> KnowledgeDomain:
    """Staff edit of a domain's guidance (admin). A written when_to_retrieve becomes "manual" and is
    never regenerated; clearing it hands it back to the generator (a regeneration is queued)."""
    row = KnowledgeDomain.objects.select_for_update().filter(pk=domain.pk).first() if domain.pk else None
    if row is None:
        row = domain
    previous = (row.when_to_retrieve or "").strip()
    new_when = (when_to_retrieve or "").strip()
    row.description = (description or "").strip() or None
    row.when_to_retrieve = new_when
    regenerate = False
    if new_when and new_when != previous:
        row.summary_source = Source.MANUAL
    elif not new_when:
        row.summary_source = ""
        regenerate = True
    row.save()
    if regenerate:
        domain_summary_request(domain_id=row.domain_id, countdown=0)
    return row


def domains_missing_summary() -> list[str]:
    """Domains with INDEXED documents but no knowledge_domain row or an empty when_to_retrieve
    (the seeds' loadIndex check)."""
    with_documents = set(domain_ids_with_documents(searchable_only=True))
    complete = set(
        KnowledgeDomain.objects.filter(domain_id__in=with_documents)
        .exclude(when_to_retrieve__isnull=True)
        .exclude(when_to_retrieve="")
        .values_list("domain_id", flat=True)
    )
    return sorted(with_documents - complete)


def domains_left_dirty() -> list[str]:
    """Domains with a change no regeneration has covered yet: their queued task may have been
    lost (a worker stopped while holding it in its countdown, a broker outage at upload)."""
    return sorted(
        KnowledgeDomain.objects.filter(dirty_since__isnull=False).values_list("domain_id", flat=True)
    )


def domains_missing_summary_queue() -> list[str]:
    """Queue a regeneration (now) for every domain without guidance or left dirty; the worker
    runs this when it starts."""
    targets = sorted(set(domains_missing_summary()) | set(domains_left_dirty()))
    for domain_id in targets:
        domain_summary_request(domain_id=domain_id, countdown=0)
    return targets


@transaction.atomic
def domain_summary_regenerate_now(*, domain_id: str) -> None:
    """Queue a regeneration that ignores the debounce window ("regenerate now" in the admin)."""
    KnowledgeDomain.objects.filter(domain_id=domain_id).update(summary_state=State.PENDING)
    task_queue_on_commit(REGENERATE_TASK, args=(domain_id, None))
