"""A document's covers / when_to_retrieve once it is indexed (seed 004 Part B): generated when
the frontmatter lacks them, by the LLM or the extractive summariser, never over manual values."""

import pytest

from knowledge.models import ApiDocument, KnowledgeDomain
from knowledge.services.document_metadata import document_indexed, document_metadata_update
from knowledge.tasks.domains import document_summary_fill_task
from tests.support.domain_map import calls_of, indexed_document
from tests.support.fake_openai import Reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_commit(django_capture_on_commit_callbacks):
    """Run what the hooks queue after commit (Celery is eager in the embedded test run)."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def eager_retries():
    """Eager Celery runs a task's retries at once (countdown ignored) when errors do not
    propagate: the whole retry chain of the worker, in-process."""
    from config.celery import app

    previous = app.conf.task_eager_propagates
    app.conf.task_eager_propagates = False
    yield
    app.conf.task_eager_propagates = previous


def _reload(document: ApiDocument) -> dict:
    document.refresh_from_db()
    return document.metadata


def test_without_an_llm_the_extractive_summariser_fills_both_fields_and_the_domain(on_commit, settings):
    settings.LLM_BASE_URL = ""
    doc = indexed_document(
        doc_key="pay/fail.md",
        domain="payment",
        title="支付失败排查手册",
        content="# 支付失败排查手册\n## 支付超时\n## 扣款无回调\n",
    )
    with on_commit():
        document_indexed(document_id=doc.pk)
    metadata = _reload(doc)
    assert metadata["covers"] == ["支付超时", "扣款无回调"]
    assert metadata["covers_source"] == metadata["when_to_retrieve_source"] == "extractive"
    assert metadata["when_to_retrieve"].startswith("用户问题涉及支付失败排查手册")
    assert metadata["summary_content_hash"] == doc.content_hash
    assert "summary_reason" not in metadata
    domain = KnowledgeDomain.objects.get(domain_id="payment")
    assert domain.summary_source == "extractive"
    assert "支付超时" in domain.when_to_retrieve
    assert (domain.document_count, domain.summary_state) == (1, "ok")


def test_with_an_llm_both_fields_come_from_it(llm, on_commit):
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", title="DB pool")
    with on_commit():
        document_indexed(document_id=doc.pk)
    metadata = _reload(doc)
    assert metadata["covers"] == ["DB pool scenario"]
    assert metadata["when_to_retrieve"] == "LLM: when DB pool matters"
    assert metadata["covers_source"] == metadata["when_to_retrieve_source"] == "llm"
    assert calls_of(llm, "document") == 1
    domain = KnowledgeDomain.objects.get(domain_id="infrastructure")
    assert (domain.when_to_retrieve, domain.summary_source) == ("LLM: domain guidance", "llm")
    assert domain.description == "LLM: domain description"


def test_frontmatter_values_are_manual_and_never_sent_for_generation(llm, on_commit):
    doc = indexed_document(
        doc_key="infra/db.md", domain="infrastructure", covers=["连接池"], when_to_retrieve="数据库连接池问题"
    )
    with on_commit():
        document_indexed(document_id=doc.pk)
    metadata = _reload(doc)
    assert (metadata["covers"], metadata["when_to_retrieve"]) == (["连接池"], "数据库连接池问题")
    assert metadata["covers_source"] == "manual"
    assert calls_of(llm, "document") == 0
    # the domain is still summarised from it
    assert calls_of(llm, "domain") == 1
    assert '"连接池"' in llm.chat_requests()[0].messages[1]["content"]


def test_only_the_missing_field_is_generated(llm, on_commit):
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", title="DB pool", covers=["连接池"])
    with on_commit():
        document_indexed(document_id=doc.pk)
    metadata = _reload(doc)
    assert (metadata["covers"], metadata["covers_source"]) == (["连接池"], "manual")
    assert (metadata["when_to_retrieve"], metadata["when_to_retrieve_source"]) == (
        "LLM: when DB pool matters",
        "llm",
    )


def test_generated_values_are_redone_only_when_the_content_changes(llm, on_commit):
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", title="DB pool")
    with on_commit():
        document_indexed(document_id=doc.pk)
    with on_commit():
        document_indexed(document_id=doc.pk)  # indexed again, same text
    assert calls_of(llm, "document") == 1

    # re-uploaded with new text (ingestion keeps the old metadata, changes content and hash)
    ApiDocument.objects.filter(pk=doc.pk).update(
        content="# DB pool\n## new section\n", content_hash="new-hash"
    )
    with on_commit():
        document_indexed(document_id=doc.pk)
    assert calls_of(llm, "document") == 2
    assert _reload(doc)["summary_content_hash"] == "new-hash"


def test_staff_edits_become_manual_and_survive_regeneration(llm, on_commit):
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", title="DB pool")
    with on_commit():
        document_indexed(document_id=doc.pk)
        document_metadata_update(document_id=doc.pk, covers=["人工标签"])
    ApiDocument.objects.filter(pk=doc.pk).update(content="changed", content_hash="changed")
    with on_commit():
        document_indexed(document_id=doc.pk)
    metadata = _reload(doc)
    assert (metadata["covers"], metadata["covers_source"]) == (["人工标签"], "manual")
    # the generated field follows the new content; the manual one stays
    assert metadata["when_to_retrieve_source"] == "llm"
    assert metadata["summary_content_hash"] == "changed"


def test_clearing_a_staff_value_hands_it_back_to_the_generator(llm, on_commit):
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", title="DB pool", covers=["人工"])
    with on_commit():
        document_metadata_update(document_id=doc.pk, covers=[])
    metadata = _reload(doc)
    assert (metadata["covers"], metadata["covers_source"]) == (["DB pool scenario"], "llm")


def test_bad_staff_input_is_refused_naming_the_field_and_nothing_changes():
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", covers=["a"])
    with pytest.raises(ValueError, match="covers: must be a list of strings"):
        document_metadata_update(document_id=doc.pk, covers="not a list")
    assert _reload(doc)["covers"] == ["a"]


def test_documents_not_indexed_are_left_alone(llm, on_commit):
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", status=ApiDocument.Status.FAILED)
    with on_commit():
        document_indexed(document_id=doc.pk)
    assert "covers" not in _reload(doc) and llm.call_count == 0


def test_an_llm_answering_garbage_leaves_the_extractive_summary_with_the_reason(llm, on_commit):
    llm.responder = lambda body: "Sure! Here are some tags: a, b"
    doc = indexed_document(
        doc_key="infra/db.md", domain="infrastructure", title="DB pool", keywords=["HikariCP"]
    )
    with on_commit():
        document_indexed(document_id=doc.pk)
    metadata = _reload(doc)
    assert metadata["covers"] == ["Overview"]
    assert metadata["covers_source"] == "extractive"
    assert metadata["summary_reason"].startswith("invalid LLM output: not JSON")


def test_an_llm_refusing_for_good_leaves_the_extractive_summary_without_retrying(llm, on_commit):
    llm.responder = lambda body: Reply(status=401)
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", title="DB pool")
    with on_commit():
        document_indexed(document_id=doc.pk)
    metadata = _reload(doc)
    assert metadata["covers_source"] == "extractive"
    assert metadata["summary_reason"].startswith("LLM refused: HTTP 401")
    assert calls_of(llm, "document") == 1


def test_an_llm_down_is_retried_a_bounded_number_of_times_then_the_extractive_summary_is_used(
    llm, settings, eager_retries
):
    settings.LLM_TASK_RETRIES = 2
    llm.responder = lambda body: Reply(status=503)
    doc = indexed_document(doc_key="infra/db.md", domain="infrastructure", title="DB pool")

    document_summary_fill_task.apply(args=(doc.pk,))

    # one call, then LLM_TASK_RETRIES retries, then the extractive summary with the reason
    assert llm.call_count == 3
    metadata = _reload(doc)
    assert metadata["covers_source"] == "extractive"
    assert metadata["summary_reason"].startswith("LLM failed: HTTP 503")
