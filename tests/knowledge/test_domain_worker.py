"""The domain map through the real worker (service-backed run: MariaDB, Redis broker and lock,
a Celery worker process) with a local OpenAI-protocol server as the LLM: uploads -> document
fields -> one domain summary per debounce window."""

import re
import time

import pytest

from knowledge.models import ApiDocument, KnowledgeDomain
from knowledge.services.document_metadata import document_indexed
from knowledge.services.domains import (
    domain_regeneration_lock,
    domain_summary_regenerate_now,
)
from tests.support.domain_map import calls_of, good_answers, indexed_document
from tests.support.fake_openai import Reply

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

WINDOW = 2.0


@pytest.fixture
def llm(fake_openai, settings, monkeypatch):
    """The fake LLM, configured for this process and (through the environment) for the worker
    that the celery_worker fixture starts after it."""
    values = {
        "LLM_BASE_URL": fake_openai.base_url,
        "LLM_MAX_RETRIES": 0,
        "LLM_TIMEOUT": 5.0,
        "LLM_TASK_RETRIES": 2,
        "LLM_TASK_RETRY_BACKOFF": 0.3,
        "DOMAIN_SUMMARY_DEBOUNCE_SECONDS": WINDOW,
    }
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))
        setattr(settings, name, value)
    fake_openai.responder = good_answers
    return fake_openai


def wait_until(condition, *, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _domain(domain_id: str = "payment") -> KnowledgeDomain | None:
    return KnowledgeDomain.objects.filter(domain_id=domain_id).first()


def _finished_regenerations(worker) -> list[str]:
    log = worker.log_path.read_text(errors="replace")
    return re.findall(r"domain_summary_regenerate_task\[[^\]]+\] succeeded in [\d.]+s: '(\w+)'", log)


def test_fifty_uploads_in_one_window_cost_one_llm_call_on_the_real_worker(llm, celery_worker):
    # Given 50 documents uploaded into one domain (with frontmatter guidance) inside the window
    for i in range(50):
        doc = indexed_document(
            doc_key=f"payment/{i:02}.md",
            domain="payment",
            title=f"支付文档{i:02}",
            covers=[f"场景{i:02}"],
            when_to_retrieve=f"问题涉及场景{i:02}时",
        )
        document_indexed(document_id=doc.pk)  # what ingestion calls on commit
    # When the worker has run all 50 queued regenerations
    outcomes = wait_until(
        lambda: len(_finished_regenerations(celery_worker)) >= 50 and _finished_regenerations(celery_worker),
        what="50 regeneration tasks",
    )
    # Then 49 stood down for a newer change and one asked the LLM, once
    assert sorted(set(outcomes)) == ["regenerated", "superseded"]
    assert outcomes.count("regenerated") == 1 and len(outcomes) == 50
    assert calls_of(llm, "domain") == 1
    domain = _domain()
    assert (domain.when_to_retrieve, domain.summary_source, domain.summary_state) == (
        "LLM: domain guidance",
        "llm",
        "ok",
    )
    assert domain.document_count == 50
    # and nothing more comes after another window
    time.sleep(WINDOW + 0.5)
    assert llm.call_count == 1


def test_upload_to_document_fields_to_domain_summary_end_to_end(llm, celery_worker):
    # Given three documents without covers / when_to_retrieve and two with them
    bare = [
        indexed_document(doc_key=f"infra/{name}.md", domain="infrastructure", title=name) for name in "ABC"
    ]
    manual = [
        indexed_document(
            doc_key=f"infra/m{i}.md", domain="infrastructure", covers=[f"人工{i}"], when_to_retrieve="人工"
        )
        for i in range(2)
    ]
    # When ingestion reports them indexed
    for doc in bare + manual:
        document_indexed(document_id=doc.pk)
    # Then the worker fills the three from the LLM ...
    wait_until(
        lambda: (d := _domain("infrastructure")) and d.summary_state == "ok" and d.summary_source,
        what="summary",
    )
    for doc in bare:
        doc.refresh_from_db()
        assert doc.metadata["covers"] == [f"{doc.title} scenario"]
        assert doc.metadata["covers_source"] == doc.metadata["when_to_retrieve_source"] == "llm"
    for doc in manual:
        doc.refresh_from_db()
        assert doc.metadata["covers_source"] == "manual"
    # ... and writes the domain summary once, from all five
    time.sleep(WINDOW + 0.5)
    assert calls_of(llm, "document") == 3
    assert calls_of(llm, "domain") == 1
    sent = next(r for r in llm.chat_requests() if "planner guidance" in r.messages[0]["content"]).messages[1][
        "content"
    ]
    assert all(tag in sent for tag in ("A scenario", "B scenario", "C scenario", "人工0", "人工1"))
    domain = _domain("infrastructure")
    assert (domain.when_to_retrieve, domain.summary_source, domain.document_count) == (
        "LLM: domain guidance",
        "llm",
        5,
    )


def test_llm_down_bounded_retries_keep_the_previous_summary_then_regenerate_now_recovers(llm, celery_worker):
    indexed_document(doc_key="payment/a.md", domain="payment", covers=["退款"], when_to_retrieve="退款时")
    KnowledgeDomain.objects.create(domain_id="payment", when_to_retrieve="之前的摘要", summary_source="llm")
    llm.responder = lambda body: Reply(status=500)

    domain_summary_regenerate_now(domain_id="payment")

    wait_until(lambda: _domain().summary_state == "failed", what="the final failure")
    assert llm.call_count == 1 + 2  # the call and LLM_TASK_RETRIES retries, then it stops
    domain = _domain()
    assert domain.when_to_retrieve == "之前的摘要"
    assert domain.last_error.startswith("LLM failed, previous summary kept: HTTP 500")
    assert "retry: Retry in 0.3s" in celery_worker.log_path.read_text()
    assert "retry: Retry in 0.6s" in celery_worker.log_path.read_text()

    llm.responder = good_answers
    domain_summary_regenerate_now(domain_id="payment")
    wait_until(lambda: _domain().summary_state == "ok", what="recovery")
    assert (_domain().when_to_retrieve, _domain().last_error) == ("LLM: domain guidance", "")


def test_a_regeneration_waits_while_another_holds_the_redis_lock(llm, celery_worker, settings):
    assert settings.REDIS_URL
    indexed_document(doc_key="payment/a.md", domain="payment", covers=["退款"], when_to_retrieve="退款时")
    KnowledgeDomain.objects.create(domain_id="payment")
    with domain_regeneration_lock(domain_id="payment") as held:
        assert held
        domain_summary_regenerate_now(domain_id="payment")
        wait_until(
            lambda: "busy" in _finished_regenerations(celery_worker), what="the worker to find it busy"
        )
        assert llm.call_count == 0
    # released: the re-queued run goes ahead a window later
    wait_until(lambda: _domain().summary_state == "ok", what="the re-queued run")
    assert llm.call_count == 1
    assert ApiDocument.objects.count() == 1
