"""The LLM endpoint down, slow or answering garbage: bounded retries with backoff and timeouts,
and a domain's previous summary kept. Against the local OpenAI-protocol server; the last test
runs the regeneration on a real worker (service-backed run)."""

import time

import pytest

from knowledge.llm import LLMUnavailable, get_llm_client
from knowledge.models import KnowledgeDomain
from knowledge.services.domains import domain_summary_regenerate, domain_summary_regenerate_now
from tests.support.domain_map import indexed_document
from tests.support.fake_openai import Reply

PREVIOUS = "之前的摘要：退款相关问题时检索"


@pytest.mark.parametrize(
    "body",
    ["<html><body>502 Bad Gateway</body></html>", b"\x00\xff\xfe not json", "Service temporarily down"],
)
def test_a_200_that_is_not_a_chat_completion_is_unavailable_not_a_crash(llm, body):
    llm.push(Reply(body=body))
    with pytest.raises(LLMUnavailable, match="not a chat completion"):
        get_llm_client().chat(messages=[{"role": "user", "content": "x"}])


def _domain_with_a_previous_summary() -> None:
    indexed_document(doc_key="payment/a.md", domain="payment", covers=["退款"], when_to_retrieve="退款时")
    KnowledgeDomain.objects.create(domain_id="payment", when_to_retrieve=PREVIOUS, summary_source="llm")


@pytest.mark.django_db
def test_an_answer_that_stays_invalid_keeps_the_previous_summary(llm):
    _domain_with_a_previous_summary()
    llm.responder = lambda body: "Sure! Here is a summary: payments."  # not the JSON asked for

    domain_summary_regenerate(domain_id="payment")

    domain = KnowledgeDomain.objects.get(domain_id="payment")
    assert llm.call_count == 2  # asked again once, then it stops
    assert (domain.when_to_retrieve, domain.summary_source) == (PREVIOUS, "llm")
    assert domain.summary_state == "failed"
    assert domain.last_error.startswith("LLM failed, previous summary kept: invalid LLM output")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("fault", "calls", "error"),
    [
        ("slow", 3, "APITimeoutError"),  # a call and LLM_TASK_RETRIES retries, each timing out
        ("html", 3, "not a chat completion"),
        ("invalid json", 2, "invalid LLM output"),  # asked again once; not a temporary fault
    ],
)
def test_on_the_real_worker_faults_are_retried_a_bounded_number_of_times_and_the_summary_kept(
    llm, settings, monkeypatch, request, fault, calls, error
):
    values = {"LLM_BASE_URL": llm.base_url, "LLM_MAX_RETRIES": 0, "LLM_TIMEOUT": 0.5}
    values |= {"LLM_TASK_RETRIES": 2, "LLM_TASK_RETRY_BACKOFF": 0.2}
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))  # for the worker started below
        setattr(settings, name, value)
    worker = request.getfixturevalue("celery_worker")
    _domain_with_a_previous_summary()
    llm.responder = {
        "slow": lambda body: Reply(content="late", delay=2.0),
        "html": lambda body: Reply(body="<html><body>502 Bad Gateway</body></html>"),
        "invalid json": lambda body: "payments, refunds",
    }[fault]

    domain_summary_regenerate_now(domain_id="payment")

    deadline = time.monotonic() + 60
    while KnowledgeDomain.objects.get(domain_id="payment").summary_state != "failed":
        assert time.monotonic() < deadline, worker.log_path.read_text()
        time.sleep(0.1)
    time.sleep(1.0)  # no further call may come
    assert llm.call_count == calls
    domain = KnowledgeDomain.objects.get(domain_id="payment")
    assert domain.when_to_retrieve == PREVIOUS
    assert domain.last_error.startswith("LLM failed, previous summary kept") and error in domain.last_error
