"""Tool tokens at rest: the database holds a keyed hash and an 8-character prefix, never a key.
A key is shown once, when issued (the command's last line, the admin's page after *add* or
*rotate*); afterwards staff see the prefix only; an existing plain-text DRF token keeps working
across the migration that hashes it; every transport still takes the key as before.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from io import StringIO

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.urls import reverse
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rest_framework.test import APIClient

from knowledge.models import ApiDocument
from retrieval.agents.tokens import token_lookup, tool_token_issue
from retrieval.models import AgentToken
from tests.retrieval.test_mcp_server import LiveAsgi

PROMPT = "/api/prompts/executor"
DIFY = "/api/dify/retrieval"


def _get(key: str, scheme: str = "Token"):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    return client.get(PROMPT)


def _all_text_in_the_database() -> str:
    """Every value of every table, as text: what a leaked backup would show."""
    out = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            out.extend(str(value) for row in cursor.fetchall() for value in row)
    return "\n".join(out)


# --- at rest -----------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_an_issued_key_is_nowhere_in_the_database():
    # Given an agent's token, issued
    issued = tool_token_issue(name=f"agent-{uuid.uuid4().hex[:6]}")
    # When a backup of the whole database is read
    everything = _all_text_in_the_database()
    # Then the key is not in it; only its prefix and a 64-hex-digit digest are
    assert issued.key not in everything
    row = AgentToken.objects.get(user=issued.user)
    assert row.prefix == issued.key[:8] and len(row.digest) == 64 and row.digest != issued.key
    # And the key still works
    assert _get(issued.key).status_code == 200


@pytest.mark.django_db
def test_every_transport_takes_the_key_as_before(vector_store):
    key = tool_token_issue(name=f"agent-{uuid.uuid4().hex[:6]}").key
    assert _get(key, "Token").status_code == 200  # REST
    dify = APIClient()
    dify.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert (
        dify.post(
            DIFY, {"knowledge_id": "*", "query": "x", "retrieval_setting": {"top_k": 1}}, format="json"
        ).status_code
        == 200
    )
    # A near miss (one character changed) is refused everywhere
    wrong = key[:-1] + ("0" if key[-1] != "0" else "1")
    assert _get(wrong).status_code == 401
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Bearer {wrong}").post(DIFY, {}, format="json").json()["error_code"]
        == 1002
    )


@pytest.mark.django_db(transaction=True)
def test_mcp_takes_the_key_as_token_and_as_bearer():
    key = tool_token_issue(name=f"agent-{uuid.uuid4().hex[:6]}").key

    async def tools(scheme: str) -> set[str]:
        async with (
            httpx.AsyncClient(headers={"Authorization": f"{scheme} {key}"}, timeout=30) as http,
            streamable_http_client(server.mcp_url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return {t.name for t in (await session.list_tools()).tools}

    with LiveAsgi() as server:
        assert (
            asyncio.run(tools("Token"))
            == asyncio.run(tools("Bearer"))
            == {"lookup_knowledge", "get_knowledge_map"}
        )


# --- the migration -----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_plain_text_drf_token_keeps_working_after_the_migration_and_its_key_is_gone():
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    # Given the database before tokens were hashed, with an agent's DRF token in plain text
    call_command("migrate", "retrieval", "0001", verbosity=0)
    try:
        user = get_user_model().objects.create(username=f"legacy-{uuid.uuid4().hex[:6]}")
        key = Token.objects.create(user=user).key
        # When the migration runs
        call_command("migrate", "retrieval", verbosity=0)
    finally:
        call_command("migrate", verbosity=0)
    # Then the agent's key still works, on every transport's lookup
    assert token_lookup(key).user == user
    assert _get(key).status_code == 200
    # And the plain text is gone: no DRF row, no key anywhere; the admin shows the prefix
    assert not Token.objects.exists()
    assert key not in _all_text_in_the_database()
    assert AgentToken.objects.get(user=user).prefix == key[:8]


# --- the command -------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_issue_tool_token_shows_a_key_once_and_rotates_on_request():
    name = f"cli-{uuid.uuid4().hex[:6]}"
    out, err = StringIO(), StringIO()
    # Given a key issued by the command (alone on the last line)
    call_command("issue_tool_token", name, stdout=out, stderr=err)
    key = out.getvalue().strip().splitlines()[-1]
    assert _get(key).status_code == 200 and key[:8] in err.getvalue()
    # When it is asked again without --rotate
    again = StringIO()
    with pytest.raises(CommandError, match="--rotate") as refused:
        call_command("issue_tool_token", name, stdout=again, stderr=StringIO())
    # Then it refuses, prints no key, and the key still works
    assert again.getvalue() == "" and key not in str(refused.value)
    assert _get(key).status_code == 200
    # When it is asked with --rotate: a new key on the last line, and the old one stops working
    rotated = StringIO()
    call_command("issue_tool_token", name, "--rotate", stdout=rotated, stderr=StringIO())
    new_key = rotated.getvalue().strip().splitlines()[-1]
    assert new_key != key and _get(new_key).status_code == 200 and _get(key).status_code == 401


@pytest.mark.django_db
def test_setup_demo_keeps_the_demo_key_it_wrote_and_replaces_one_it_lost(settings, tmp_path, monkeypatch):
    settings.DEBUG = True
    monkeypatch.setattr("retrieval.management.commands.setup_demo.VAR_DIR", tmp_path)
    ApiDocument.objects.create(
        doc_key="mine.md", title="Mine", domain="d", content="x", content_hash="0" * 64
    )
    credentials = tmp_path / "demo-credentials.json"

    call_command("setup_demo", stdout=StringIO(), stderr=StringIO())
    first = json.loads(credentials.read_text())["agent_token"]
    call_command("setup_demo", stdout=StringIO(), stderr=StringIO())
    # Run again: the same key, still working
    assert json.loads(credentials.read_text())["agent_token"] == first and _get(first).status_code == 200

    # The file lost its key: a new one is issued and written, the unknown old one is revoked
    stored = json.loads(credentials.read_text())
    del stored["agent_token"]
    credentials.write_text(json.dumps(stored))
    out = StringIO()
    call_command("setup_demo", stdout=out, stderr=StringIO())
    second = json.loads(credentials.read_text())["agent_token"]
    assert second != first and second in out.getvalue()
    assert _get(second).status_code == 200 and _get(first).status_code == 401


# --- the admin ---------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_staff_see_keys_once_when_issued_and_only_prefixes_afterwards(admin_client):
    # Given an agent's token
    issued = tool_token_issue(name=f"listed-{uuid.uuid4().hex[:6]}")
    changelist = reverse("admin:retrieval_agenttoken_changelist")

    # When staff open the list and the token's page, then they see the prefix, never the key
    listing = admin_client.get(changelist).content.decode()
    page = admin_client.get(
        reverse("admin:retrieval_agenttoken_change", args=[issued.token.pk])
    ).content.decode()
    for html in (listing, page):
        assert issued.key not in html and f"{issued.key[:8]}…" in html
    # DRF's token page, which listed keys in full, is gone
    with pytest.raises(Exception):  # noqa: B017 - NoReverseMatch
        reverse("admin:authtoken_tokenproxy_changelist")

    # When staff issue a token in the admin, the next page shows the key, once, uncached
    name = f"from-admin-{uuid.uuid4().hex[:6]}"
    response = admin_client.post(reverse("admin:retrieval_agenttoken_add"), {"agent": name})
    assert response.status_code == 200
    shown = response.content.decode()
    new_key = shown.split('<code class="issued-key">')[1].split("</code>")[0]
    assert _get(new_key).status_code == 200
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]
    assert new_key not in admin_client.get(changelist).content.decode()
    # Issuing again for the same agent is refused with the way out named
    again = admin_client.post(reverse("admin:retrieval_agenttoken_add"), {"agent": name})
    assert again.status_code == 200 and "rotate" in again.content.decode()
    assert AgentToken.objects.filter(user__username=name).count() == 1


@pytest.mark.django_db
def test_staff_rotate_and_revoke_in_the_admin(admin_client):
    issued = tool_token_issue(name=f"rotated-{uuid.uuid4().hex[:6]}")
    changelist = reverse("admin:retrieval_agenttoken_changelist")
    # Rotate: a new key shown once, the old one refused
    response = admin_client.post(changelist, {"action": "rotate", "_selected_action": [issued.token.pk]})
    assert response.status_code == 200
    new_key = response.content.decode().split('<code class="issued-key">')[1].split("</code>")[0]
    assert _get(issued.key).status_code == 401 and _get(new_key).status_code == 200
    # Revoke: delete the token, the key is refused
    token = AgentToken.objects.get(user=issued.user)
    assert (
        admin_client.post(
            reverse("admin:retrieval_agenttoken_delete", args=[token.pk]), {"post": "yes"}
        ).status_code
        == 302
    )
    assert _get(new_key).status_code == 401


@pytest.mark.django_db
def test_staff_who_may_only_view_tokens_cannot_rotate_them(django_user_model):
    from django.contrib.auth.models import Permission

    issued = tool_token_issue(name=f"guarded-{uuid.uuid4().hex[:6]}")
    viewer = django_user_model.objects.create_user("viewer", password="pw-123456789", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_agenttoken"))
    client = Client()
    client.force_login(viewer)
    changelist = reverse("admin:retrieval_agenttoken_changelist")
    assert client.get(changelist).status_code == 200
    client.post(changelist, {"action": "rotate", "_selected_action": [issued.token.pk]})
    assert _get(issued.key).status_code == 200  # not rotated
