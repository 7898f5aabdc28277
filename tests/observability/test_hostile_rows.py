"""Nothing an agent sends can break a staff page (issue 12, item 5).

A hostile agent script runs through the real endpoints (the schemathesis cases of
tests/config/test_api_fuzz.py, then bodies and values chosen to hurt: null, a number, a list, a
huge string, lone surrogates, a tower of combining marks, emoji), rows like them are also stored
directly (any writer, any past version), and then every staff page is rendered: each answers 200
and shows the stored text clipped, the whole of it on hover. The browser test
(test_browser_pages.py) checks that none of them is wider than the viewport.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib import admin
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection
from django.db.models import JSONField, Value
from django.test import Client
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from knowledge.services.documents import document_ingest
from observability.models import InvocationFeedback, ToolInvocation
from retrieval.agents.tokens import tool_token_issue

COMBINING = "e" + "\u0301" * 300
HOSTILE_VALUES = [
    None,
    12345,
    -1.5e308,
    True,
    ["支付失败", 1, None],
    {"nested": {"deep": ["x" * 50]}},
    "x" * 100_000,
    "lone \ud800 surrogate \udfff",
    COMBINING,
    "🔥" * 300 + "👩‍👩‍👧‍👦🏳️‍🌈",
    "<script>alert(1)</script>\"'&",
    "",
]
# The agent's name is chosen by whoever issues its token, under the username rules (letters of
# any script, digits, @.+-_, at most 150): the longest unbroken name they allow, in a
# right-to-left script mixed with Latin. Names the rules refuse (markup, combining marks) are
# refused when the token is issued (test_a_hostile_agent_name_is_refused_when_its_token_is_issued);
# the dashboard's own rendering of such a name, stored directly, is tested in
# test_dashboard_agents.py.
HOSTILE_AGENT_NAME = ("שלום" + "agent.@+-_" + "ب" * 40 + "W" * 150)[:150]
# Raw bodies: what no serializer would build.
HOSTILE_BODIES = ["null", "12345", "[1, 2, 3]", '"a string"', '{"session_id": "x"}', "{"]


def _as_stored(value):
    """A value as writers store it in a JSON column. MariaDB's JSON cannot hold a lone surrogate at
    all (the INSERT fails), so writers escape it there (``retrieval.entrypoints.dify._recordable``)."""
    if connection.vendor == "mysql" and isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _lone_surrogate_shown() -> str:
    """How a staff page shows the stored lone-surrogate value: U+FFFD where the database kept the
    surrogate, the escaped text where it had to be escaped."""
    return (
        _as_stored("lone \ud800 surrogate \udfff")
        if connection.vendor == "mysql"
        else "lone \ufffd surrogate \ufffd"
    )


def hostile_rows(*, now=None) -> list[ToolInvocation]:
    """Rows as any writer might have stored them: every hostile value as the query, the session,
    the request itself and inside retrieval_details (used by the browser test too)."""
    now = now or timezone.now()
    rows = []
    for i, value in enumerate(HOSTILE_VALUES):
        text = value if isinstance(value, str) else json.dumps(value)
        value = _as_stored(value)  # the JSON columns get what a writer would store
        for tool in ("lookup_knowledge", "dify_retrieval"):
            rows.append(
                ToolInvocation.objects.create(
                    tool_name=tool,
                    session_id=("s-" + text.encode("utf-8", "replace").decode())[:128],
                    request={"query": value, "session_id": value, "top_k": value},
                    status=ToolInvocation.Status.SUCCESS,
                    duration_ms=5 + i,
                    result_summary="not found: " + text.encode("utf-8", "replace").decode()[:2000],
                    created_at=now - timedelta(minutes=3 + i),
                    retrieval_details={
                        "query": value,
                        "completeness_hint": value,
                        "returned_doc_keys": [value] if tool == "dify_retrieval" else [],
                        "l1_scores": [value, 0.4],
                        "l1_candidates": [{"doc_key": value, "title": value, "score": value}],
                        "thresholds": value,
                    },
                )
            )
    json_null = Value(None, output_field=JSONField())  # JSON null, not SQL NULL
    for request in (json_null, 12345, ["a", "b"], "just a string", {"query": {"a": 1}}):
        rows.append(
            ToolInvocation.objects.create(
                tool_name="lookup_knowledge",
                session_id="s-odd-request",
                request=request,
                status=ToolInvocation.Status.ERROR,
                error="invalid input",
                retrieval_details=request,
                created_at=now - timedelta(minutes=30),
            )
        )
    return rows


def staff_urls() -> list[str]:
    """Every page the admin serves: the index, each app, each registered model's list, up to 40
    objects of each, and the pages' filter variants that read stored values."""
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        info = model._meta.app_label, model._meta.model_name
        app = reverse("admin:app_list", args=[info[0]])
        if app not in urls:
            urls.append(app)
        try:
            urls.append(reverse(f"admin:{info[0]}_{info[1]}_changelist"))
        except NoReverseMatch:
            continue
        for pk in model._default_manager.order_by("-pk").values_list("pk", flat=True)[:40]:
            try:
                urls.append(reverse(f"admin:{info[0]}_{info[1]}_change", args=[pk]))
            except NoReverseMatch:
                break
    invocations = reverse("admin:observability_toolinvocation_changelist")
    dashboard = reverse("admin:observability_retrievaldashboard_changelist")
    urls += [
        f"{invocations}?level=none",
        f"{invocations}?tool_name=dify_retrieval",
        f"{invocations}?q=%F0%9F%94%A5",
        f"{dashboard}?range=24h",
        f"{dashboard}?range=7d&tool=__all__",
        f"{dashboard}?range=24h&tool=dify_retrieval",
        f"{dashboard}?range=1h",
        f"{dashboard}?range=7d&tool=__all__&agent=0",
    ]
    # The dashboard narrowed to each agent that made calls (their names are in the page).
    for agent_id in (
        ToolInvocation.objects.filter(agent__isnull=False)
        .order_by()
        .values_list("agent_id", flat=True)
        .distinct()
    ):
        urls += [
            f"{dashboard}?range=24h&agent={agent_id}",
            f"{dashboard}?range=7d&tool=__all__&agent={agent_id}",
        ]
        urls.append(f"{invocations}?agent__id__exact={agent_id}")
    return urls


@pytest.fixture
def agent(vector_store):
    document_ingest(
        data="---\ndomain: api\nkeywords: [ERR_TIMEOUT]\n---\n# 网关错误码\n\nERR_TIMEOUT：请求超时。".encode(),
        name="api/error-codes.md",
    )
    return tool_token_issue(name=HOSTILE_AGENT_NAME).key


def _hostile_script(token: str) -> None:
    """What a hostile agent sends, through the real endpoints (answers are not the point here:
    tests/config/test_api_fuzz.py checks those; what they leave behind is)."""
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    dify = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    lookup = reverse("retrieval:lookup-knowledge")
    for body in HOSTILE_BODIES:
        client.post(lookup, body, content_type="application/json")
        dify.post(reverse("retrieval:dify-retrieval"), body, content_type="application/json")
    for value in HOSTILE_VALUES:
        for payload in ({"query": value, "session_id": "s-1"}, {"query": "超时", "session_id": value}):
            response = client.post(lookup, json.dumps(payload), content_type="application/json")
            invocation = response.headers.get("X-Invocation-Id")
            if invocation:
                client.post(
                    reverse("observability:lookup-feedback"),
                    json.dumps({"invocation_id": invocation, "helpful": False, "comment": value}),
                    content_type="application/json",
                )
        dify.post(
            reverse("retrieval:dify-retrieval"),
            json.dumps(
                {
                    "knowledge_id": "api",
                    "query": value,
                    "retrieval_setting": {"top_k": 3, "score_threshold": 0.1},
                    "metadata_condition": value,
                }
            ),
            content_type="application/json",
        )


@pytest.mark.django_db
def test_every_staff_page_renders_after_a_hostile_agent(agent, admin_client, settings):
    from config.wsgi import application
    from tests.config.test_api_fuzz import _fuzz

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"tool": "1000000/min"}}
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        _fuzz(application, agent, examples=5)
        _hostile_script(agent)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    # What the endpoints recorded of it: a number as the query, from REST and from Dify.
    assert ToolInvocation.objects.filter(tool_name="lookup_knowledge", request__query=12345).exists()
    assert ToolInvocation.objects.filter(tool_name="dify_retrieval", request__query=12345).exists()
    hostile_rows()
    assert ToolInvocation.objects.filter(agent__username=HOSTILE_AGENT_NAME).exists()

    broken = []
    urls = staff_urls()
    assert any("agent=" in url for url in urls)
    for url in urls:
        response = admin_client.get(url, follow=True)  # DRF's token pages redirect by user id
        if response.status_code != 200:
            broken.append(f"{url} -> {response.status_code}")
            continue
        html = response.content.decode("utf-8")  # a lone surrogate would not even encode
        if "\u0301" * (3 + 1) in html:
            broken.append(f"{url}: an untamed run of combining marks")
    assert broken == [], "\n".join(broken)


@pytest.mark.django_db
def test_stored_values_are_clipped_with_the_whole_text_on_hover(admin_client):
    hostile_rows()
    InvocationFeedback.objects.create(
        invocation=ToolInvocation.objects.first(), source="AGENT", helpful=False, comment="y" * 5000
    )
    listing = admin_client.get(reverse("admin:observability_toolinvocation_changelist")).content.decode()
    # 100,000 characters: 48 shown, the hover text capped; the page stays small.
    assert 'title="' + "x" * 2000 + '"' in listing and "x" * 2001 not in listing
    assert "x" * 47 + "…" in listing
    assert len(listing) < 400_000
    # A lone surrogate is shown as U+FFFD; numbers and lists as JSON; null as "(no query)".
    assert _lone_surrogate_shown() in listing
    assert ">12345<" in listing and "[&quot;支付失败&quot;, 1, null]" in listing
    assert "&lt;script&gt;" in listing and "<script>alert" not in listing
    # "not found" is the one name of no level (never "-").
    assert re.search(r'okb-level-none">not found<', listing)
    feedback = admin_client.get(reverse("admin:observability_invocationfeedback_changelist")).content.decode()
    assert "y" * 59 + "…" in feedback and "y" * 2001 not in feedback


@pytest.mark.django_db
def test_the_filtered_list_exports_as_csv(admin_client):
    import csv
    import io

    hostile_rows()
    url = reverse("admin:observability_toolinvocation_export")
    response = admin_client.get(url, {"tool_name": "dify_retrieval"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8"))))
    assert rows[0][:3] == ["id", "created_at", "tool_name"]
    assert len(rows) == 1 + len(HOSTILE_VALUES) and {r[2] for r in rows[1:]} == {"dify_retrieval"}
    assert _lone_surrogate_shown() in {r[4] for r in rows[1:]}
    listing = admin_client.get(
        reverse("admin:observability_toolinvocation_changelist"), {"tool_name": "dify_retrieval"}
    )
    assert f"{url}?tool_name=dify_retrieval" in listing.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name", ["<img src=x onerror=alert(1)>", "a" + "\u0301" * 40, "🔥" * 10, "x" * 151, "tab\tname"]
)
def test_a_hostile_agent_name_is_refused_when_its_token_is_issued(name):
    from django.contrib.auth import get_user_model

    with pytest.raises(ValueError, match=r"^name: "):
        tool_token_issue(name=name)
    assert not get_user_model().objects.filter(username=name).exists()  # nothing half-written
