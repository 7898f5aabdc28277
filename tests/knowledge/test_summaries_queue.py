"""The LLM work cannot block indexing: summaries go to a queue of their own, at most
``LLM_TASK_SLOTS`` of them call the LLM at once, and each is bounded in time.

The last test is service-backed: a real worker serving both queues (as the embedded setup's one
worker does) while the LLM endpoint hangs (accepts connections, never answers).
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from django.conf import settings as django_settings

from config.celery import app
from knowledge.models import ApiDocument
from knowledge.services.documents import document_ingest
from knowledge.services.locks import llm_slot
from knowledge.tasks.domains import (
    document_summary_fill_task,
    documents_summary_fill_task,
    domain_summary_regenerate_task,
)
from knowledge.tasks.indexing import index_document, index_documents
from tests.conftest import REPO
from tests.knowledge.test_ingestion import markdown
from tests.support.hung_peer import HungPeer

#: the ports this suite's own servers may take
PORTS = range(22100, 22200)


def _queue_of(task) -> str:
    return app.amqp.router.route({}, task.name, (), {}, task_type=task)["queue"].name


def test_summary_tasks_go_to_the_summaries_queue_and_indexing_to_the_default_one(settings):
    settings.CELERY_SUMMARIES_QUEUE = "llm-work"
    assert _queue_of(document_summary_fill_task) == _queue_of(documents_summary_fill_task) == "llm-work"
    assert _queue_of(domain_summary_regenerate_task) == "llm-work"
    assert _queue_of(index_document) == _queue_of(index_documents) == app.conf.task_default_queue


def test_a_worker_without_q_and_the_embedded_worker_serve_both_queues():
    declared = {queue.name: queue.routing_key for queue in django_settings.CELERY_TASK_QUEUES}
    assert set(declared) == {
        django_settings.CELERY_TASK_DEFAULT_QUEUE,
        django_settings.CELERY_SUMMARIES_QUEUE,
    }
    # each bound by its own key: on Redis, two queues bound by one key both get every message
    assert all(key == name for name, key in declared.items()), declared
    worker = next(line for line in (REPO / "Procfile").read_text().splitlines() if line.startswith("worker:"))
    assert "-Q ${CELERY_TASK_DEFAULT_QUEUE:-celery},${CELERY_SUMMARIES_QUEUE:-summaries}" in worker


def test_each_summary_task_is_bounded_in_time():
    for task in (document_summary_fill_task, documents_summary_fill_task, domain_summary_regenerate_task):
        # two LLM calls at most (an invalid answer is asked again once) and a margin
        assert task.soft_time_limit == 2 * django_settings.LLM_TIMEOUT + 30
        assert task.time_limit == task.soft_time_limit + 30


class SlotHolder:
    """Asks for an LLM slot from a thread of its own (its own database connection, as another
    worker process would have) and holds what it got until ``release``."""

    def __init__(self, slots: int) -> None:
        self.free: bool | None = None
        self._asked, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(slots,), daemon=True)
        self._thread.start()
        assert self._asked.wait(10)

    def _hold(self, slots: int) -> None:
        from django.db import connection

        try:
            with llm_slot(slots=slots) as free:
                self.free = free
                self._asked.set()
                self._release.wait(30)
        finally:
            connection.close()

    def release(self) -> None:
        self._release.set()
        self._thread.join(10)


@pytest.fixture
def every_slot_taken():
    """The one LLM slot held by another holder until the test ends."""
    holder = SlotHolder(1)
    assert holder.free
    yield
    holder.release()


@pytest.mark.django_db(transaction=True)
def test_a_summary_task_finding_every_slot_taken_is_queued_again_without_calling_the_llm(
    settings, fake_openai, monkeypatch, every_slot_taken
):
    settings.LLM_BASE_URL, settings.LLM_TASK_SLOTS, settings.LLM_SLOT_WAIT_SECONDS = (
        fake_openai.base_url,
        1,
        7,
    )
    sent: list[tuple] = []
    monkeypatch.setattr(
        document_summary_fill_task,
        "apply_async",
        lambda args=None, kwargs=None, **options: sent.append((tuple(args), kwargs, options)),
    )

    # When a summary task runs on a worker (not in process) while the one slot is taken
    document_summary_fill_task(42)

    # Then it asked nothing and was queued again a little later, its retries not spent
    assert fake_openai.call_count == 0
    assert sent == [((42,), {}, {"countdown": 7.0, "retries": 0})]


@pytest.mark.django_db(transaction=True)
def test_slots_are_counted_and_zero_means_no_cap():
    holders = [SlotHolder(2), SlotHolder(2)]
    third, uncapped = SlotHolder(2), SlotHolder(0)
    assert [h.free for h in holders] == [True, True]
    assert (third.free, uncapped.free) == (False, True)
    for holder in (*holders, third, uncapped):
        holder.release()
    again = SlotHolder(1)
    assert again.free
    again.release()


def _hung_llm() -> HungPeer:
    for port in PORTS:
        try:
            return HungPeer(port=port)
        except OSError:
            continue
    raise RuntimeError(f"no free port in {PORTS}")


def _wait_indexed(doc_keys: list[str], *, timeout: float, log) -> float:
    started = time.monotonic()
    while ApiDocument.objects.filter(doc_key__in=doc_keys, status=ApiDocument.Status.INDEXED).count() < len(
        doc_keys
    ):
        assert time.monotonic() - started < timeout, (
            list(ApiDocument.objects.values_list("doc_key", "status", "error")),
            log.read_text()[-4000:],
        )
        time.sleep(0.1)
    return time.monotonic() - started


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("celery_worker_concurrency", [2])
def test_with_the_llm_endpoint_hung_uploads_are_indexed_in_normal_time(
    vector_store, settings, monkeypatch, request, celery_worker_concurrency
):
    llm_timeout = 90
    peer = _hung_llm()
    try:
        values = {
            "LLM_BASE_URL": f"http://127.0.0.1:{peer.port}/v1",
            "LLM_TIMEOUT": llm_timeout,  # far longer than an indexing run: a blocked slot shows
            "LLM_MAX_RETRIES": 0,
            "LLM_TASK_RETRIES": 0,
            "LLM_SLOT_WAIT_SECONDS": 1,
            "DOMAIN_SUMMARY_DEBOUNCE_SECONDS": 0.2,  # the domain's summary asks at once too
        }
        for name, value in values.items():
            monkeypatch.setenv(name, str(value))  # for the worker started below
            setattr(settings, name, value)
        worker = request.getfixturevalue("celery_worker")

        # Given a first upload, indexed, whose summaries now wait on the hung endpoint
        document_ingest(data=markdown("支付失败排查手册", 4), name="payment/handbook.md")
        first = _wait_indexed(["payment/handbook.md"], timeout=120, log=worker.log_path)
        deadline = time.monotonic() + 30
        while peer.accepted < 1:
            assert time.monotonic() < deadline, worker.log_path.read_text()[-4000:]
            time.sleep(0.1)
        time.sleep(3)  # the domain's summary task has come by now too, and found the slot taken

        # When two more documents are uploaded while the summary calls hang
        started = time.monotonic()
        document_ingest(data=markdown("退款流程", 4), name="payment/refunds.md")
        document_ingest(data=markdown("网关错误码", 4, domain="api"), name="api/gateway.md")
        both = _wait_indexed(["payment/refunds.md", "api/gateway.md"], timeout=60, log=worker.log_path)

        # Then both are INDEXED in about the time one upload takes, while the LLM still hangs:
        # the summaries held one worker process, never the other
        print(f"first upload indexed in {first:.1f} s; two uploads during the hang in {both:.1f} s")
        assert time.monotonic() - started < llm_timeout / 3, "indexing waited for the hung LLM"
        assert peer.accepted == 1, "more than LLM_TASK_SLOTS summary tasks called the LLM at once"
        # And every message reached one queue only: no task was received twice
        received = re.findall(r"Task (\S+)\[([0-9a-f-]+)\] received", worker.log_path.read_text())
        assert any(name == "knowledge.tasks.domains.documents_summary_fill_task" for name, _ in received)
        assert len({task_id for _, task_id in received}) == len(received), received
    finally:
        peer.close()  # the hung calls fail at once: the worker stops without waiting them out
