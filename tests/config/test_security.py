"""Security: revocable tool tokens, staff-only pages, CSRF on admin forms, per-token throttling,
production settings (DEBUG refused, SECRET_KEY required, `check --deploy` clean) and no secret
in logs or recorded invocations."""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue
from tests.conftest import REPO

LOOKUP = reverse("retrieval:lookup-knowledge")


def _agent(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _lookup(client: APIClient, session: str = "s-sec"):
    return client.post(LOOKUP, {"query": "ERR_TIMEOUT", "session_id": session}, format="json")


# --- tokens -----------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_staff_revoke_a_tool_token_in_the_admin_and_it_stops_working_at_once(admin_client, vector_store):
    token = tool_token_issue(name="agent-to-revoke")
    agent = _agent(token.key)
    assert _lookup(agent).status_code == 200

    # The admin's token page deletes it: that is revocation
    page = reverse("admin:retrieval_agenttoken_delete", args=[token.token.pk])
    assert admin_client.get(page).status_code == 200
    response = admin_client.post(page, {"post": "yes"})
    assert response.status_code == 302

    response = _lookup(agent)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


@pytest.mark.django_db
def test_tool_endpoints_refuse_calls_without_a_token(vector_store):
    assert APIClient().post(LOOKUP, {"query": "q", "session_id": "s"}, format="json").status_code == 401
    assert APIClient().get(reverse("retrieval:knowledge-map")).status_code == 401


# --- staff-only pages and CSRF ----------------------------------------------------------------------
STAFF_PAGES = [
    "admin:observability_retrievaldashboard_changelist",
    "admin:observability_hittest_changelist",
    "admin:observability_toolinvocation_changelist",
    "admin:knowledge_apidocument_bulk_upload",
    "admin:retrieval_agenttoken_changelist",
]


@pytest.mark.django_db
@pytest.mark.parametrize("name", STAFF_PAGES)
def test_dashboards_hit_testing_uploads_and_tokens_are_for_staff_only(client, django_user_model, name):
    url = reverse(name)
    # Anonymous: sent to the login page
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    # A logged-in user who is not staff: also sent to the login page, never shown the page
    user = django_user_model.objects.create_user("plain", password="pw-123456789")
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    # An agent's token is no admin login
    token = tool_token_issue(name="agent-x")
    response = Client(HTTP_AUTHORIZATION=f"Token {token.key}").get(url)
    assert response.status_code == 302


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("admin:observability_hittest_changelist", {"query": "ERR_TIMEOUT"}),
        ("admin:knowledge_apidocument_bulk_upload", {}),
        ("admin:retrieval_agenttoken_add", {"agent": "csrf-agent"}),
    ],
)
def test_admin_forms_refuse_posts_without_the_csrf_token(admin_user, name, data):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.get(reverse(name)).status_code == 200
    response = client.post(reverse(name), data)
    assert response.status_code == 403
    assert b"CSRF" in response.content


# --- throttling -------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_each_token_has_its_own_throttle_budget(settings, vector_store):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"tool": "2/min"}}
    # Fresh tokens: fresh budgets (the throttle keys on a hash of the token; no cache clearing,
    # which on Redis would flush what other processes keep there).
    first, second = _agent(tool_token_issue(name="t-a").key), _agent(tool_token_issue(name="t-b").key)
    assert [_lookup(first).status_code for _ in range(3)] == [200, 200, 429]
    assert _lookup(second).status_code == 200


# --- production settings ----------------------------------------------------------------------------
def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {
        k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings_production", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


PRODUCTION = {"ALLOWED_HOSTS": "kb.example.com", "SECRET_KEY": secrets.token_urlsafe(50)}


def test_production_settings_refuse_debug(tmp_path):
    result = _manage("check", DEBUG="true", AGENTKB_VAR_DIR=str(tmp_path), **PRODUCTION)
    assert result.returncode != 0
    assert "DEBUG is on, which production settings refuse" in result.stderr


def test_production_settings_refuse_a_missing_secret_key(tmp_path):
    result = _manage("check", ALLOWED_HOSTS="kb.example.com", AGENTKB_VAR_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_check_deploy_is_clean_under_production_settings(tmp_path):
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING", AGENTKB_VAR_DIR=str(tmp_path), **PRODUCTION
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


# --- no secrets in logs or records ------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_no_token_or_llm_key_appears_in_logs_or_recorded_invocations(
    settings, fake_openai, vector_store, caplog, django_capture_on_commit_callbacks
):
    from knowledge.services.documents import document_ingest
    from knowledge.services.domains import domain_summary_regenerate
    from tests.support.domain_map import good_answers

    llm_key = "sk-agentkb-" + secrets.token_hex(16)
    settings.LLM_BASE_URL, settings.LLM_API_KEY, settings.LLM_MAX_RETRIES = fake_openai.base_url, llm_key, 0
    fake_openai.api_key, fake_openai.responder = llm_key, good_answers
    token = tool_token_issue(name="agent-logs").key
    caplog.set_level(logging.DEBUG)

    # The LLM is called with the key (document and domain summaries), an agent looks up with its token,
    # and a call with a wrong token is refused
    document_ingest(data=b"---\ndomain: api\n---\n# ERR_TIMEOUT\n\ntimeout error code", name="api/codes.md")
    domain_summary_regenerate(domain_id="api")
    assert fake_openai.call_count >= 1
    assert all(r.headers.get("authorization") == f"Bearer {llm_key}" for r in fake_openai.chat_requests())
    assert _lookup(_agent(token)).status_code == 200
    assert _lookup(_agent(token[:-4] + "0000")).status_code == 401

    logged = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert caplog.records, "nothing was logged: the test would prove nothing"
    assert llm_key not in logged and token not in logged
    recorded = json.dumps(
        list(ToolInvocation.objects.values("request", "retrieval_details", "error", "result_summary")),
        ensure_ascii=False,
    )
    assert ToolInvocation.objects.exists()
    assert llm_key not in recorded and token not in recorded and token[:-4] not in recorded
