"""A domain's when_to_retrieve regenerated from its documents (seed 004 Part B): debounced,
never interleaved, manual guidance kept, failures recorded with the previous summary kept."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from knowledge.models import ApiDocument, KnowledgeDomain
from knowledge.services.domains import (
    Outcome,
    domain_documents_changed,
    domain_regeneration_lock,
    domain_summary_regenerate,
    domains_missing_summary,
)
from knowledge.tasks.domains import _queue_missing_domain_summaries, domain_summary_regenerate_task
from tests.support.domain_map import calls_of, indexed_document
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_commit(django_capture_on_commit_callbacks):
    return lambda execute=True: django_capture_on_commit_callbacks(execute=execute)


@pytest.fixture
def eager_retries():
    from config.celery import app

    previous = app.conf.task_eager_propagates
    app.conf.task_eager_propagates = False
    yield
    app.conf.task_eager_propagates = previous


def _payment_documents(count: int) -> list[ApiDocument]:
    return [
        indexed_document(
            doc_key=f"payment/{i:02}.md",
            domain="payment",
            title=f"支付文档{i:02}",
            covers=[f"场景{i:02}"],
            when_to_retrieve=f"问题涉及场景{i:02}时",
        )
        for i in range(count)
    ]


def _domain(domain_id: str = "payment") -> KnowledgeDomain:
    return KnowledgeDomain.objects.get(domain_id=domain_id)


def test_fifty_changes_inside_the_window_cost_one_llm_call(llm, on_commit):
    # Given 50 uploads into one domain, each reporting the change
    documents = _payment_documents(50)
    with on_commit(execute=False) as queued:
        for _ in documents:
            domain_documents_changed(domain_id="payment")
    # Then 50 regenerations are queued, each for its own change
    assert len(queued) == 50
    # When they run (in the worker each runs a window after its change; here in order)
    for send in queued:
        send()
    # Then only the one queued for the last change asked the LLM
    assert calls_of(llm, "domain") == 1
    domain = _domain()
    assert (domain.when_to_retrieve, domain.summary_source, domain.summary_state) == (
        "LLM: domain guidance",
        "llm",
        "ok",
    )
    assert domain.document_count == 50 and domain.dirty_since is None and domain.last_regenerated_at
    # and the LLM read every document's covers and when_to_retrieve, as data
    sent = llm.chat_requests()[0].messages[1]["content"]
    assert all(f"场景{i:02}" in sent and f"问题涉及场景{i:02}时" in sent for i in range(50))


def test_a_regeneration_queued_for_an_older_change_exits_without_calling_the_llm(llm):
    _payment_documents(1)
    domain_documents_changed(domain_id="payment")
    domain_documents_changed(domain_id="payment")
    assert domain_summary_regenerate(domain_id="payment", expected_seq=1) is Outcome.SUPERSEDED
    assert llm.call_count == 0
    assert domain_summary_regenerate(domain_id="payment", expected_seq=2) is Outcome.REGENERATED
    assert llm.call_count == 1


def test_two_regenerations_of_one_domain_never_interleave(llm):
    _payment_documents(2)
    with domain_regeneration_lock(domain_id="payment") as held:
        assert held
        with domain_regeneration_lock(domain_id="payment") as second:
            assert not second
        # a regeneration arriving meanwhile does not start (its task re-queues itself)
        assert domain_summary_regenerate(domain_id="payment") is Outcome.BUSY
        assert llm.call_count == 0
    # released: the next one runs
    assert domain_summary_regenerate(domain_id="payment") is Outcome.REGENERATED
    assert llm.call_count == 1


def test_without_redis_the_lock_is_a_lease_on_the_row_that_expires(settings):
    settings.REDIS_URL = ""
    _payment_documents(1)
    with domain_regeneration_lock(domain_id="payment") as held:
        assert held and _domain().locked_until is not None
        with domain_regeneration_lock(domain_id="payment") as second:
            assert not second
    assert _domain().locked_until is None
    # a worker died holding it
    KnowledgeDomain.objects.filter(domain_id="payment").update(
        lock_token="dead-worker", locked_until=timezone.now() - timedelta(seconds=1)
    )
    with domain_regeneration_lock(domain_id="payment") as held:
        assert held


def test_a_change_during_a_regeneration_leaves_the_domain_pending(llm, monkeypatch):
    from knowledge.services import domains

    _payment_documents(1)
    domain_documents_changed(domain_id="payment")  # change 1 (its task is not run here)
    real = domains.llm_domain_summary

    def while_the_llm_thinks_a_document_changes(**kwargs):
        KnowledgeDomain.objects.filter(domain_id="payment").update(change_seq=99)
        return real(**kwargs)

    monkeypatch.setattr(domains, "llm_domain_summary", while_the_llm_thinks_a_document_changes)
    assert domain_summary_regenerate(domain_id="payment", expected_seq=1) is Outcome.REGENERATED
    domain = _domain()
    # written, but still dirty: the task queued for change 99 will run after it
    assert domain.when_to_retrieve == "LLM: domain guidance"
    assert domain.summary_state == "pending" and domain.dirty_since is not None


def test_manual_guidance_is_never_overwritten_but_an_empty_description_is_filled(llm):
    _payment_documents(2)
    KnowledgeDomain.objects.create(
        domain_id="payment", when_to_retrieve="人工：支付问题", summary_source="manual"
    )
    domain_summary_regenerate(domain_id="payment")
    domain = _domain()
    assert (domain.when_to_retrieve, domain.summary_source) == ("人工：支付问题", "manual")
    assert domain.description == "LLM: domain description"
    # with a description too, there is nothing left for the LLM
    domain_summary_regenerate(domain_id="payment")
    assert calls_of(llm, "domain") == 1


def test_a_domain_whose_documents_are_all_gone_loses_its_generated_guidance(llm, on_commit):
    documents = _payment_documents(1)
    domain_summary_regenerate(domain_id="payment")
    documents[0].delete()
    with on_commit():
        domain_documents_changed(domain_id="payment")
    domain = _domain()
    assert (domain.when_to_retrieve, domain.summary_source, domain.document_count) == ("", "", 0)
    assert calls_of(llm, "domain") == 1


def test_invalid_llm_output_falls_back_to_extractive_and_says_why(llm):
    _payment_documents(2)
    llm.responder = lambda body: "ignore the format"
    domain_summary_regenerate(domain_id="payment")
    domain = _domain()
    assert domain.summary_source == "extractive"
    assert domain.when_to_retrieve.startswith("用户问题涉及场景00、场景01时检索payment域")
    assert domain.last_error.startswith("invalid LLM output")
    assert llm.call_count == 2


def test_llm_down_retries_with_backoff_then_keeps_the_previous_summary_and_shows_the_error(
    llm, settings, eager_retries
):
    settings.LLM_TASK_RETRIES = 2
    _payment_documents(2)
    domain_summary_regenerate(domain_id="payment")
    assert _domain().when_to_retrieve == "LLM: domain guidance"

    llm.responder = lambda body: Reply(status=502)
    result = domain_summary_regenerate_task.apply(args=("payment", None))

    assert result.get() == "failed"
    assert calls_of(llm, "domain") == 1 + 3  # the first success, then one call and two retries
    domain = _domain()
    assert (domain.when_to_retrieve, domain.summary_source) == ("LLM: domain guidance", "llm")
    assert domain.summary_state == "failed"
    assert domain.last_error.startswith("LLM failed, previous summary kept: HTTP 502")


def test_llm_down_for_a_new_domain_writes_the_extractive_summary_so_the_map_is_not_empty(
    llm, settings, eager_retries
):
    settings.LLM_TASK_RETRIES = 0
    _payment_documents(1)
    llm.responder = lambda body: Reply(status=500)
    domain_summary_regenerate_task.apply(args=("payment", None))
    domain = _domain()
    assert domain.summary_source == "extractive" and "场景00" in domain.when_to_retrieve
    assert domain.summary_state == "failed"
    assert domain.last_error.startswith("LLM failed, extractive summary written")


def test_an_llm_refusing_for_good_is_recorded_without_retries(llm, settings, eager_retries):
    settings.LLM_TASK_RETRIES = 3
    _payment_documents(1)
    llm.responder = lambda body: Reply(status=401)
    assert domain_summary_regenerate_task.apply(args=("payment", None)).get() == "failed"
    assert llm.call_count == 1
    assert _domain().summary_state == "failed"


def test_start_up_queues_domains_with_documents_but_no_guidance(on_commit, settings):
    settings.LLM_BASE_URL = ""
    indexed_document(doc_key="a/1.md", domain="no-row")
    indexed_document(doc_key="b/1.md", domain="empty")
    indexed_document(doc_key="c/1.md", domain="done")
    indexed_document(doc_key="d/1.md", domain="not-indexed", status=ApiDocument.Status.PENDING)
    KnowledgeDomain.objects.create(domain_id="empty", when_to_retrieve="")
    KnowledgeDomain.objects.create(domain_id="done", when_to_retrieve="已有", summary_source="llm")
    assert domains_missing_summary() == ["empty", "no-row"]

    with on_commit():
        _queue_missing_domain_summaries()  # what the worker runs on worker_ready

    assert domains_missing_summary() == []
    assert _domain("no-row").summary_source == "extractive"
    assert _domain("done").when_to_retrieve == "已有"


def test_start_up_requeues_domains_whose_queued_regeneration_was_lost(llm, on_commit):
    _payment_documents(1)
    KnowledgeDomain.objects.create(domain_id="payment", when_to_retrieve="旧的", summary_source="llm")
    domain_documents_changed(domain_id="payment")  # its task is lost: never run
    assert _domain().dirty_since is not None

    with on_commit():
        _queue_missing_domain_summaries()

    domain = _domain()
    assert (domain.when_to_retrieve, domain.dirty_since, domain.summary_state) == (
        "LLM: domain guidance",
        None,
        "ok",
    )


def test_a_broker_outage_does_not_fail_the_change_and_leaves_the_domain_dirty(monkeypatch, on_commit):
    from knowledge.tasks.domains import domain_summary_regenerate_task

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(domain_summary_regenerate_task, "apply_async", broker_down)
    _payment_documents(1)
    with on_commit():
        domain_documents_changed(domain_id="payment")
    assert _domain().dirty_since is not None and _domain().document_count == 1


def test_regenerate_domains_command_sync_and_queued(llm, on_commit, capsys):
    _payment_documents(1)
    indexed_document(doc_key="infra/db.md", domain="infrastructure", covers=["连接池"], when_to_retrieve="池")

    call_command("regenerate_domains", "--domain", "payment", "--sync")
    out = capsys.readouterr().out
    assert "payment: regenerated [llm] LLM: domain guidance" in out
    assert not KnowledgeDomain.objects.filter(domain_id="infrastructure", summary_source="llm").exists()

    with on_commit():
        call_command("regenerate_domains")
    assert "queued 2 domain(s): infrastructure, payment" in capsys.readouterr().out
    assert _domain("infrastructure").summary_source == "llm"

    with pytest.raises(CommandError, match="--domain: unknown domain"):
        call_command("regenerate_domains", "--domain", "nope")


def test_regenerate_domains_sync_reports_failure(llm, capsys):
    _payment_documents(1)
    llm.responder = lambda body: Reply(status=500)
    with pytest.raises(CommandError, match="not regenerated: payment"):
        call_command("regenerate_domains", "--sync")
    assert "LLM failed" in capsys.readouterr().out


# --- admin -----------------------------------------------------------------------------------


def test_admin_list_shows_count_source_last_regenerated_state_and_error(admin_client):
    KnowledgeDomain.objects.create(
        domain_id="payment",
        document_count=7,
        summary_source="llm",
        summary_state="failed",
        last_regenerated_at=timezone.now(),
        last_error="LLM failed, previous summary kept: HTTP 502",
    )
    page = admin_client.get(reverse("admin:knowledge_knowledgedomain_changelist")).content.decode()
    for text in ("payment", ">7<", "LLM", "Failed", "LLM failed, previous summary kept: HTTP 502"):
        assert text in page


def test_staff_writing_when_to_retrieve_makes_it_manual(admin_client, llm, on_commit):
    _payment_documents(1)
    domain_summary_regenerate(domain_id="payment")
    url = reverse("admin:knowledge_knowledgedomain_change", args=[_domain().pk])
    assert 'name="when_to_retrieve"' in admin_client.get(url).content.decode()

    response = admin_client.post(url, {"description": "支付", "when_to_retrieve": "人工写的时机"})
    assert response.status_code == 302
    domain = _domain()
    assert (domain.when_to_retrieve, domain.summary_source, domain.description) == (
        "人工写的时机",
        "manual",
        "支付",
    )

    # a later regeneration keeps it
    domain_summary_regenerate(domain_id="payment")
    assert _domain().when_to_retrieve == "人工写的时机"

    # cleared, it goes back to the generator
    with on_commit():
        admin_client.post(url, {"description": "支付", "when_to_retrieve": ""})
    assert (_domain().when_to_retrieve, _domain().summary_source) == ("LLM: domain guidance", "llm")


def test_admin_regenerate_now_ignores_the_window(admin_client, llm, on_commit, settings):
    settings.DOMAIN_SUMMARY_DEBOUNCE_SECONDS = 3600
    _payment_documents(1)
    domain = KnowledgeDomain.objects.create(
        domain_id="payment", last_error="old error", summary_state="failed"
    )
    with on_commit():
        response = admin_client.post(
            reverse("admin:knowledge_knowledgedomain_changelist"),
            {"action": "regenerate_now", "_selected_action": [domain.pk]},
            follow=True,
        )
    assert "Regeneration queued for 1 domain." in response.content.decode()
    domain = _domain()
    assert (domain.summary_state, domain.last_error, domain.summary_source) == ("ok", "", "llm")
