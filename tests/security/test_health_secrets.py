"""Health without secrets: anonymous callers and agents (tool-token holders) learn only whether
each part is up; staff get the details, and wherever a URI is shown (health, the `make run`
banner, log lines, admin pages) its password and credential parameters are masked."""

from __future__ import annotations

import logging

import pytest
from django.urls import reverse

from config import health
from config.debug import CredentialMaskingFormatter, services_banner
from knowledge.vectorstore import VectorStoreError, reset_vector_store
from retrieval.agents.tokens import tool_token_issue
from tests.conftest import free_port

PASSWORD, TOKEN, API_KEY = "hunter2-pw", "tok-9f8e7d", "sk-live-0123"


def _milvus_uri(port: int) -> str:
    return f"http://root:{PASSWORD}@127.0.0.1:{port}/?token={TOKEN}"


def _leaks(text: str) -> list[str]:
    return [secret for secret in (PASSWORD, TOKEN, API_KEY) if secret in text]


@pytest.fixture
def milvus_down_with_credentials(settings):
    """MILVUS_URI carries a password and a token, and nothing answers there."""
    settings.MILVUS_URI = _milvus_uri(free_port())
    settings.MILVUS_TIMEOUT = 2
    reset_vector_store()
    yield settings.MILVUS_URI
    reset_vector_store()


@pytest.mark.django_db
def test_anonymous_callers_and_agents_learn_only_up_or_down(client, milvus_down_with_credentials):
    # Given: Milvus, configured with credentials in its URI, is down; an agent holds a tool token
    token = tool_token_issue(name="curious-agent").key

    # When: an anonymous probe and the agent ask for health
    anonymous = client.get("/healthz")
    agent = client.get("/healthz", HTTP_AUTHORIZATION=f"Token {token}")
    bearer = client.get("/healthz", HTTP_AUTHORIZATION=f"Bearer {token}")

    # Then: both see which part is down, and nothing else
    for response in (anonymous, agent, bearer):
        body = response.json()
        assert response.status_code == 503
        assert body["down"] == ["vector_store", "lexical_index"]
        assert body["checks"] == {
            "database": {"ok": True},
            "vector_store": {"ok": False},
            "lexical_index": {"ok": False},
            "broker": {"ok": True},
            "action_memory": {"ok": True},
            "storage": {"ok": True},
        }
        assert "127.0.0.1" not in response.content.decode() and not _leaks(response.content.decode())


@pytest.mark.django_db
def test_staff_get_the_details_with_credentials_masked(admin_client, milvus_down_with_credentials):
    response = admin_client.get("/healthz")
    body, text = response.json(), response.content.decode()
    assert response.status_code == 503
    error = body["checks"]["vector_store"]["error"]
    assert error.startswith("VectorStoreError: cannot connect to Milvus at http://root:********@127.0.0.1:")
    assert "token=********" in error
    assert body["checks"]["database"]["detail"] and "ms" in body["checks"]["broker"]
    assert _leaks(text) == []


@pytest.mark.django_db
def test_staff_see_where_a_part_runs_without_its_password(admin_client, monkeypatch):
    # Given: the vector store answers, at a URI with credentials
    where = f"https://root:{PASSWORD}@milvus.internal:19530/?db=kb&token={TOKEN}"
    monkeypatch.setitem(health.CHECKS, "vector_store", lambda: where)

    body = admin_client.get("/healthz").json()

    assert body["checks"]["vector_store"]["detail"] == (
        "https://root:********@milvus.internal:19530/?db=kb&token=********"
    )


def test_the_make_run_banner_masks_every_uri(settings):
    settings.MILVUS_URI = _milvus_uri(19530)
    settings.CELERY_BROKER_URL = f"redis://:{PASSWORD}@10.0.0.5:6379/0"
    settings.REDIS_URL = f"redis://agentkb:{PASSWORD}@10.0.0.5:6379/1"
    settings.LLM_BASE_URL = f"https://llm.example/v1?api_key={API_KEY}"

    banner = services_banner()

    assert _leaks(banner) == []
    assert "http://root:********@127.0.0.1:19530/?token=********" in banner
    assert "redis://:********@10.0.0.5:6379/0" in banner and "redis://agentkb:********@10.0.0.5" in banner
    assert "https://llm.example/v1?api_key=********" in banner


def test_log_lines_that_print_uris_are_masked():
    # The handler the project configures (settings.LOGGING "console"), as it formats a line.
    [handler] = [
        h for h in logging.getLogger().handlers if isinstance(h.formatter, CredentialMaskingFormatter)
    ]
    record = logging.LogRecord(
        "knowledge.vectorstore",
        logging.WARNING,
        __file__,
        1,
        "reconnecting to %s (llm %s, password=%s)",
        (_milvus_uri(19530), f"https://llm.example/v1?key={API_KEY}", PASSWORD),
        None,
    )
    line = handler.format(record)
    assert _leaks(line) == []
    assert "root:********@127.0.0.1" in line and "key=********" in line


def test_celery_worker_log_lines_are_masked_too():
    from celery import signals

    # Given: the handler a Celery worker sets up itself (its own format, not settings.LOGGING)
    worker_logger = logging.getLogger("agentkb-test-worker")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[worker] %(message)s"))
    worker_logger.addHandler(handler)
    try:
        # When: the worker has set up its logging
        signals.after_setup_logger.send(sender=None, logger=worker_logger, loglevel=logging.INFO)
        record = logging.LogRecord(
            "httpx",
            logging.INFO,
            __file__,
            1,
            "HTTP Request: POST %s",
            (f"https://llm/v1?api_key={API_KEY}",),
            None,
        )
        # Then: its lines keep their format and lose the key
        assert handler.format(record) == "[worker] HTTP Request: POST https://llm/v1?api_key=********"
    finally:
        worker_logger.removeHandler(handler)


@pytest.mark.django_db
def test_admin_pages_show_failures_without_the_credentials_in_them(admin_client):
    from knowledge.models import ApiDocument, KnowledgeDomain
    from knowledge.services.domains import domain_summary_failure_record
    from knowledge.services.index_status import documents_index_failed
    from observability.services import invocation_record

    # Given: Milvus (URI with credentials) failed a lookup and an indexing run, and the LLM (a key
    # in its URL) failed a domain summary
    failure = VectorStoreError(f"cannot connect to Milvus at {_milvus_uri(19530)}: connection refused")
    invocation = invocation_record(
        tool_name="lookup_knowledge",
        session_id="s",
        request={"query": "q"},
        status="DEGRADED",
        duration_ms=5,
        error=f"vector search unavailable: {failure}",
    )
    document = ApiDocument.objects.create(
        doc_key="api/a.md", title="A", domain="api", content="x", content_hash="h"
    )
    documents_index_failed(document_ids=[document.pk], reason=f"vector store unavailable: {failure}")
    domain = KnowledgeDomain.objects.create(domain_id="api")
    domain_summary_failure_record(
        domain_id="api", error=f"POST https://llm.example/v1/chat?api_key={API_KEY}: 502", final=False
    )

    # When: staff open the pages that show them
    pages = [
        reverse("admin:observability_toolinvocation_change", args=[invocation.pk]),
        reverse("admin:observability_toolinvocation_changelist"),
        reverse("admin:knowledge_apidocument_change", args=[document.pk]),
        reverse("admin:knowledge_apidocument_changelist"),
        reverse("admin:knowledge_knowledgedomain_change", args=[domain.pk]),
        reverse("admin:knowledge_knowledgedomain_changelist"),
    ]
    for url in pages:
        response = admin_client.get(url)
        # Then: each shows the failure, never the password, token or key
        assert response.status_code == 200, url
        assert _leaks(response.content.decode()) == [], url
    document_page = admin_client.get(pages[2]).content.decode()
    assert "http://root:********@127.0.0.1:19530/?token=********" in document_page


@pytest.mark.django_db
def test_an_error_recorded_before_masking_is_masked_on_the_invocation_page(admin_client):
    from observability.models import ToolInvocation

    # Given: a row written unmasked (by an older version)
    invocation = ToolInvocation.objects.create(
        tool_name="lookup_knowledge",
        session_id="s",
        request={"query": "q"},
        status="DEGRADED",
        duration_ms=5,
        error=f"cannot connect to Milvus at {_milvus_uri(19530)}",
    )
    page = admin_client.get(reverse("admin:observability_toolinvocation_change", args=[invocation.pk]))
    assert page.status_code == 200 and _leaks(page.content.decode()) == []
