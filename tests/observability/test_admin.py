import pytest
from django.urls import reverse

from knowledge.models import ApiDocument, KnowledgeDomain
from observability.models import ToolInvocation


@pytest.fixture
def seeded(db):
    KnowledgeDomain.objects.create(domain_id="infrastructure", description="Infra")
    doc = ApiDocument.objects.create(
        doc_key="infra/db.md", title="DB pool", domain="infrastructure", content="x", content_hash="h"
    )
    inv = ToolInvocation.objects.create(
        session_id="s1", tool_name="lookup_knowledge", relevance_level="PRECISE"
    )
    return doc, inv


@pytest.mark.parametrize(
    "model", ["knowledge_knowledgedomain", "knowledge_apidocument", "observability_toolinvocation"]
)
def test_admin_changelists_render(admin_client, seeded, model):
    response = admin_client.get(reverse(f"admin:{model}_changelist"))
    assert response.status_code == 200


def test_tool_invocations_are_read_only(admin_client, seeded):
    _, inv = seeded
    assert admin_client.get(reverse("admin:observability_toolinvocation_add")).status_code == 403
    page = admin_client.get(reverse("admin:observability_toolinvocation_change", args=[inv.pk]))
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    admin_client.post(
        reverse("admin:observability_toolinvocation_change", args=[inv.pk]), {"session_id": "changed"}
    )
    inv.refresh_from_db()
    assert inv.session_id == "s1"


def test_anonymous_is_sent_to_login(client, seeded):
    response = client.get(reverse("admin:observability_toolinvocation_changelist"))
    assert response.status_code == 302 and "/login/" in response["Location"]


# --- the observability pages: staff see them, anonymous and non-staff users do not ---------------

PAGES = [
    "admin:observability_retrievaldashboard_changelist",
    "admin:observability_hittest_changelist",
    "admin:observability_thresholdcalibration_changelist",
    "admin:observability_invocationfeedback_changelist",
    "admin:observability_toolinvocation_changelist",
]


@pytest.fixture
def non_staff_client(client, django_user_model):
    user = django_user_model.objects.create_user("agent-x", password="pw-agent-x-123")
    client.force_login(user)
    return client


@pytest.mark.parametrize("name", PAGES)
def test_staff_sees_each_page(admin_client, seeded, name):
    assert admin_client.get(reverse(name)).status_code == 200


@pytest.mark.parametrize("name", PAGES)
def test_anonymous_is_sent_to_login_from_each_page(client, seeded, name):
    response = client.get(reverse(name))
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.parametrize("name", PAGES)
def test_non_staff_user_does_not_see_any_page(non_staff_client, seeded, name):
    response = non_staff_client.get(reverse(name))
    # The admin sends users without is_staff to its login page.
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_staff_without_permission_is_refused(client, django_user_model, seeded):
    staff = django_user_model.objects.create_user("staff-x", password="pw-staff-x-123", is_staff=True)
    client.force_login(staff)
    assert client.get(reverse("admin:observability_retrievaldashboard_changelist")).status_code == 403
    assert client.get(reverse("admin:observability_thresholdcalibration_changelist")).status_code == 403


def test_admin_index_links_the_dashboard_hit_testing_and_calibration(admin_client, seeded):
    html = admin_client.get(reverse("admin:index")).content.decode()
    for name in PAGES[:3]:
        assert reverse(name) in html


# --- the dashboard -----------------------------------------------------------------------------


def _figure(response, chart_id: str) -> dict:
    import json
    import re

    html = response.content.decode()
    match = re.search(rf'<script id="figure-{chart_id}" type="application/json">(.*?)</script>', html, re.S)
    assert match, f"no figure {chart_id}"
    return json.loads(match.group(1))


@pytest.fixture
def recent(db):
    from datetime import timedelta

    from django.utils import timezone

    from tests.observability.factories import ToolInvocationFactory

    at = timezone.now() - timedelta(minutes=30)
    for _ in range(3):
        ToolInvocationFactory(
            relevance_level="PRECISE", similarity=0.96, created_at=at, domains=["infrastructure"]
        )
    for _ in range(2):
        ToolInvocationFactory(relevance_level="REFERENCE", similarity=0.62, created_at=at, domains=["api"])
    ToolInvocationFactory(
        relevance_level="DEDUPED",
        dedup_reason="doc_retrieved",
        similarity=0.9,
        created_at=at,
        domains=["api"],
    )
    ToolInvocationFactory(relevance_level=None, similarity=0.2, query="没有这个文档", created_at=at)
    ToolInvocationFactory(relevance_level="PRECISE", created_at=at - timedelta(days=3))  # outside the day
    KnowledgeDomain.objects.create(domain_id="api", description="API")


def test_dashboard_draws_the_distributions_of_the_range(admin_client, recent, settings):
    # The seeds' pair, explicitly (without it the embedding model's profile is in force).
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD, settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.75, 0.5
    response = admin_client.get(
        reverse("admin:observability_retrievaldashboard_changelist"), {"range": "24h"}
    )
    assert response.status_code == 200
    relevance = _figure(response, "chart-relevance")["data"][0]
    assert dict(zip(relevance["x"], relevance["y"], strict=True)) == {
        "PRECISE": 3,
        "HIGHLY_RELEVANT": 0,
        "REFERENCE": 2,
        "DEDUPED": 1,
        "not found": 1,
    }
    assert relevance["text"][0] == "3 (42.9%)"
    dedup = _figure(response, "chart-dedup")["data"][0]
    assert dict(zip(dedup["x"], dedup["y"], strict=True)) == {
        "doc_retrieved": 1,
        "domain_retrieved": 0,
        "none": 6,
    }
    similarity = _figure(response, "chart-similarity")
    assert similarity["thresholds"] == {"reference": 0.5, "highly_relevant": 0.75}
    assert [s["x0"] for s in similarity["layout"]["shapes"]] == [0.5, 0.75]
    assert sum(sum(trace["y"]) for trace in similarity["data"]) == 7
    html = response.content.decode()
    assert "没有这个文档" in html  # the most frequent not-found query
    assert _figure(response, "chart-relevance")["layout"]["title"]["text"] == "Relevance level distribution"
    assert "/static/observability/vendor/plotly.min.js" in html and "cdn" not in html.lower()


def test_a_bar_links_to_the_list_of_the_calls_it_counts(admin_client, recent):
    response = admin_client.get(
        reverse("admin:observability_retrievaldashboard_changelist"), {"range": "24h"}
    )
    relevance = _figure(response, "chart-relevance")["data"][0]
    reference_url = relevance["customdata"][relevance["x"].index("REFERENCE")]
    listing = admin_client.get(reference_url)
    assert listing.status_code == 200
    assert listing.context["cl"].result_count == 2
    not_found_url = relevance["customdata"][relevance["x"].index("not found")]
    assert admin_client.get(not_found_url).context["cl"].result_count == 1
    similarity = _figure(response, "chart-similarity")
    precise = next(t for t in similarity["data"] if t["name"] == "PRECISE")
    band_url = precise["customdata"][19]  # 0.95-1.00
    assert admin_client.get(band_url).context["cl"].result_count == 3


def test_dashboard_domain_filter(admin_client, recent):
    response = admin_client.get(
        reverse("admin:observability_retrievaldashboard_changelist"), {"range": "24h", "domain": "api"}
    )
    relevance = _figure(response, "chart-relevance")["data"][0]
    # The DEDUPED call returned nothing, so it has no primary domain.
    assert dict(zip(relevance["x"], relevance["y"], strict=True))["REFERENCE"] == 2
    assert sum(relevance["y"]) == 2


def test_dashboard_custom_range_errors_name_the_field(admin_client, recent):
    response = admin_client.get(
        reverse("admin:observability_retrievaldashboard_changelist"),
        {"range": "custom", "start": "2026-03-02T00:00", "end": "2026-03-01T00:00"},
    )
    assert response.status_code == 200
    assert response.context["form"].errors == {"end": ["The end must come after the start."]}
    assert "figure-chart-relevance" not in response.content.decode()


def test_changelist_charts_follow_the_current_filters(admin_client, recent):
    url = reverse("admin:observability_toolinvocation_changelist")
    everything = admin_client.get(url)
    relevance = _figure(everything, "chart-relevance")["data"][0]
    assert (
        dict(zip(relevance["x"], relevance["y"], strict=True))["PRECISE"] == 3 + 1
    )  # no time filter: the one from three days ago counts too
    only_api = admin_client.get(url, {"domain": "api"})
    relevance = _figure(only_api, "chart-relevance")["data"][0]
    assert dict(zip(relevance["x"], relevance["y"], strict=True)) == {
        "PRECISE": 0,
        "HIGHLY_RELEVANT": 0,
        "REFERENCE": 2,
        "DEDUPED": 0,
        "not found": 0,
    }


def test_changelist_search_by_query_and_session(admin_client, recent):
    url = reverse("admin:observability_toolinvocation_changelist")
    assert admin_client.get(url, {"q": "没有这个"}).context["cl"].result_count == 1
    ToolInvocation.objects.create(
        session_id="sess-findme", tool_name="lookup_knowledge", request={"query": "x"}
    )
    assert admin_client.get(url, {"q": "sess-findme"}).context["cl"].result_count == 1


def test_detail_page_is_readable_and_takes_thumbs(admin_client, recent):
    from observability.models import InvocationFeedback

    inv = ToolInvocation.objects.filter(relevance_level="REFERENCE").first()
    page = admin_client.get(reverse("admin:observability_toolinvocation_change", args=[inv.pk]))
    html = page.content.decode()
    assert "当前结果为相关参考" in html  # the completeness hint the agent got
    assert "api/doc.md" in html and 'id="feedback-form"' in html
    assert "0.76" in html  # raw L2 score of similarity 0.62
    feedback_url = reverse("admin:observability_toolinvocation_feedback", args=[inv.pk])
    admin_client.post(feedback_url, {"helpful": "0", "comment": "wrong domain"})
    admin_client.post(feedback_url, {"helpful": "1", "comment": "on second thought"})
    feedback = InvocationFeedback.objects.get(invocation=inv)
    assert feedback.helpful is True and feedback.comment == "on second thought" and feedback.source == "STAFF"
    assert (
        "on second thought"
        in admin_client.get(
            reverse("admin:observability_toolinvocation_change", args=[inv.pk])
        ).content.decode()
    )


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"level": "REFERENCE"},
        {"level": "none", "tool_name": "lookup_knowledge"},
        {"dedup": "doc_retrieved"},
        {"status__exact": "ERROR"},
        {"domain": "api"},
        {"q": "查询 1"},  # a search: counted from the rows
    ],
)
def test_changelist_charts_from_rollups_equal_counting_the_listed_rows(
    admin_client, params, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from observability import selectors
    from tests.observability.factories import ToolInvocationFactory

    now = timezone.now()
    levels = ["PRECISE", "HIGHLY_RELEVANT", "REFERENCE", "DEDUPED", None]
    for day in range(6):
        for i in range(7):
            level = levels[(i + day) % 5]
            ToolInvocationFactory(
                created_at=now - timedelta(days=day, minutes=10 * i + 1),
                relevance_level=level,
                dedup_reason="doc_retrieved" if level == "DEDUPED" else None,
                domains=["api"] if i % 2 else ["infrastructure"],
                status=ToolInvocation.Status.ERROR if i == 6 else ToolInvocation.Status.SUCCESS,
                query=f"查询 {i % 3}",
            )
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.get(reverse("admin:observability_toolinvocation_changelist"), params)
    listed = response.context["cl"].queryset
    relevance, dedup = selectors.level_and_dedup_distributions(qs=listed)
    drawn = _figure(response, "chart-relevance")["data"][0]
    assert drawn["y"] == [row["count"] for row in relevance]
    assert _figure(response, "chart-dedup")["data"][0]["y"] == [row["count"] for row in dedup]
    assert sum(drawn["y"]) > 0 or params.get("status__exact") == "ERROR"


def test_in_chinese_the_dashboard_names_not_found_and_none_in_chinese(admin_client, recent):
    """Level names stay as the API spells them; "not found" and "none" are words, translated."""
    response = admin_client.get(
        reverse("admin:observability_retrievaldashboard_changelist"),
        {"range": "24h"},
        HTTP_ACCEPT_LANGUAGE="zh-hans",
    )
    relevance = _figure(response, "chart-relevance")["data"][0]
    assert relevance["x"] == ["PRECISE", "HIGHLY_RELEVANT", "REFERENCE", "DEDUPED", "未找到"]
    assert _figure(response, "chart-dedup")["data"][0]["x"][-1] == "无"
    over_time = {t["name"] for t in _figure(response, "chart-relevance-time")["data"]}
    assert "未找到" in over_time and "not found" not in over_time
    html = response.content.decode()
    assert ">未找到</a>" in html and ">not found</a>" not in html
