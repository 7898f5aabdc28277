"""An indexing batch's summaries: one task for each LLM slot, not one a document; each task fills
its share in turn, keeps to its time limits and, the LLM failing, neither loses a document nor
makes each wait through a retry schedule of its own. The LLM is the local fake endpoint."""

from types import SimpleNamespace

import pytest

from knowledge.models import ApiDocument
from knowledge.services.document_metadata import documents_indexed, summary_shares
from knowledge.tasks import domains as domain_tasks
from knowledge.tasks.domains import documents_summary_fill_task
from tests.support.domain_map import calls_of, good_answers, indexed_document, prompt_kind
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch) -> list[tuple]:
    """The summary tasks sent (args and options), instead of running them."""
    sent: list[tuple] = []
    monkeypatch.setattr(
        documents_summary_fill_task,
        "apply_async",
        lambda args=None, kwargs=None, **options: sent.append((list(args[0]), options)),
    )
    return sent


def _documents(count: int) -> list[int]:
    return [
        indexed_document(doc_key=f"infra/doc-{i}.md", domain="infrastructure", title=f"Doc {i}").pk
        for i in range(count)
    ]


def _sources(ids: list[int]) -> list[str | None]:
    by_id = ApiDocument.objects.in_bulk(ids)
    return [by_id[i].metadata.get("covers_source") for i in ids]


def test_the_documents_are_dealt_into_one_share_per_llm_slot_or_one_each_without_a_cap():
    assert summary_shares([1, 2, 3, 4, 5], slots=2) == [[1, 3, 5], [2, 4]]
    assert summary_shares([1, 2], slots=4) == [[1], [2]]
    assert summary_shares([1, 2, 3], slots=0) == [[1], [2], [3]]
    assert summary_shares([], slots=1) == []


@pytest.mark.parametrize(("slots", "messages"), [(1, 1), (2, 2), (0, 5)])
def test_an_indexed_batch_queues_a_summary_task_per_llm_slot_and_they_fill_every_document(
    llm, settings, django_capture_on_commit_callbacks, queued, slots, messages
):
    settings.LLM_TASK_SLOTS = slots
    ids = _documents(5)
    with django_capture_on_commit_callbacks(execute=True):
        documents_indexed(document_ids=ids)

    assert len(queued) == messages
    assert sorted(i for share, _ in queued for i in share) == ids
    for share, _ in queued:  # as a worker would run them
        documents_summary_fill_task.apply(args=(share,))
    assert _sources(ids) == ["llm"] * 5
    assert calls_of(llm, "document") == 5


def test_a_call_failing_after_some_documents_were_filled_queues_the_rest_afresh(llm, settings, queued):
    answered = []

    def first_answer_then_down(body):
        if prompt_kind(body) == "document" and not answered:
            answered.append(body)
            return good_answers(body)
        return Reply(status=503)

    llm.responder = first_answer_then_down
    first, second, third = _documents(3)
    documents_summary_fill_task.apply(args=([first, second, third],), retries=2)

    # The first kept its summary; the rest wait the first backoff, their retries unspent
    assert _sources([first, second, third]) == ["llm", None, None]
    assert queued == [([second, third], {"countdown": float(settings.LLM_TASK_RETRY_BACKOFF)})]


def test_an_llm_down_all_along_gives_every_document_the_extractive_summary_after_one_retry_schedule(
    llm, settings
):
    from config.celery import app

    settings.LLM_TASK_RETRIES = 2
    llm.responder = lambda body: Reply(status=503)
    ids = _documents(3)
    previous, app.conf.task_eager_propagates = app.conf.task_eager_propagates, False
    try:  # eager Celery runs the retries at once, in process
        documents_summary_fill_task.apply(args=(ids,))
    finally:
        app.conf.task_eager_propagates = previous

    # The first document: one call and two retries; the others one call each, not a schedule each
    assert calls_of(llm, "document") == 3 + 1 + 1
    assert _sources(ids) == ["extractive"] * 3
    assert all(
        d.metadata["summary_reason"].startswith("LLM failed: HTTP 503")
        for d in ApiDocument.objects.filter(pk__in=ids)
    )


def test_a_task_starts_no_document_its_soft_time_limit_could_cut_short_and_queues_the_rest(
    llm, settings, monkeypatch, queued
):
    # Each document takes 40 s of the clock: the room before the soft limit (90 s, less a
    # document's worst case of 2 x 30 s) holds one.
    settings.LLM_TIMEOUT, settings.LLM_TASK_SOFT_TIME_LIMIT = 30.0, 90.0
    clock = iter(range(0, 10_000, 40))
    monkeypatch.setattr(domain_tasks, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    first, second, third = _documents(3)

    documents_summary_fill_task.apply(args=([first, second, third],))

    assert _sources([first, second, third]) == ["llm", None, None]
    assert queued == [([second, third], {"retries": 0})]
    assert calls_of(llm, "document") == 1


def test_a_document_failing_for_its_own_reasons_is_logged_and_the_rest_of_its_share_filled(
    llm, monkeypatch, caplog
):
    first, second, third = _documents(3)
    real = domain_tasks.document_summary_fill

    def broken_row(*, document_id, **kwargs):
        if document_id == second:
            raise RuntimeError("this row is broken")
        return real(document_id=document_id, **kwargs)

    monkeypatch.setattr(domain_tasks, "document_summary_fill", broken_row)
    documents_summary_fill_task.apply(args=([first, second, third],))

    assert _sources([first, second, third]) == ["llm", None, "llm"]
    assert f"filling the summaries of document {second} failed" in caplog.text
