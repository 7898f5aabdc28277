"""The dashboard in a real browser: headless Chromium (Debian chromium + chromium-driver, installed
by .ci/run with a CJK font) logs in, opens the dashboard over seeded calls, reads back from
plotly.js what it drew, clicks a bar through to the list, and saves a screenshot to
var/screenshots/ (named in the README)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge.models import KnowledgeDomain
from tests.conftest import REPO
from tests.observability.factories import ToolInvocationFactory
from tests.support.browser import BROWSER_MARKS, admin_login, chromium, wait_for

SCREENSHOTS = REPO / "var" / "screenshots"

pytestmark = BROWSER_MARKS

SEEDED = {"PRECISE": 4, "HIGHLY_RELEVANT": 7, "REFERENCE": 5, "DEDUPED": 2, "not found": 3}


@pytest.fixture
def browser():
    with chromium(width=1400, height=2200) as driver:
        yield driver


@pytest.fixture
def seeded_calls(transactional_db, django_user_model):
    django_user_model.objects.create_superuser("browser-admin", "b@example.com", "browser-pass-123")
    KnowledgeDomain.objects.create(domain_id="infrastructure", description="基础设施")
    now = timezone.now()
    similarities = {
        "PRECISE": 0.97,
        "HIGHLY_RELEVANT": 0.82,
        "REFERENCE": 0.61,
        "DEDUPED": 0.88,
        "not found": 0.31,
    }
    n = 0
    for label, count in SEEDED.items():
        for _ in range(count):
            n += 1
            level = None if label == "not found" else label
            ToolInvocationFactory(
                relevance_level=level,
                dedup_reason="doc_retrieved" if level == "DEDUPED" else None,
                similarity=similarities[label],
                created_at=now - timedelta(minutes=5 + 7 * n),
                session_id=f"s{n % 6}",
                query="数据库连接池怎么配置" if level else "没有这个文档",
                duration_ms=10 + n,
            )


def test_dashboard_draws_the_seeded_values(browser, live_server, seeded_calls, settings):
    # The seeds' pair, explicitly (without it the embedding model's profile is in force).
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD, settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.75, 0.5
    admin_login(browser, live_server)

    browser.get(live_server.url + reverse("admin:observability_retrievaldashboard_changelist") + "?range=24h")
    wait_for(
        browser,
        "const els = document.querySelectorAll('[data-figure]');"
        "return els.length >= 6 && Array.from(els).every(e => e.dataset.drawn === '1');",
    )

    drawn = browser.execute_script(
        "const gd = document.getElementById('chart-relevance');"
        "return {x: gd._fullData[0].x, y: gd._fullData[0].y,"
        " bars: gd.querySelectorAll('g.point').length,"
        " labels: Array.from(gd.querySelectorAll('text.bartext')).map(t => t.textContent),"
        " title: gd.querySelector('.gtitle').textContent};"
    )
    assert dict(zip(drawn["x"], drawn["y"], strict=True)) == SEEDED
    assert drawn["bars"] == 5
    total = sum(SEEDED.values())
    assert f"7 ({round(100 * 7 / total, 1)}%)" in drawn["labels"]
    assert drawn["title"] == "Relevance level distribution"

    similarity = browser.execute_script(
        "const gd = document.getElementById('chart-similarity');"
        "return {traces: gd._fullData.map(t => [t.name, t.y.reduce((a, b) => a + b, 0)]),"
        " shapes: gd.querySelectorAll('.shapelayer path').length,"
        " notes: Array.from(gd.querySelectorAll('.annotation-text')).map(t => t.textContent)};"
    )
    assert dict(similarity["traces"]) == SEEDED
    assert similarity["shapes"] == 2
    assert similarity["notes"] == ["REFERENCE ≥ 0.50", "HIGHLY_RELEVANT ≥ 0.75"]

    dedup = browser.execute_script(
        "const gd = document.getElementById('chart-dedup'); return [gd._fullData[0].x, gd._fullData[0].y];"
    )
    assert dict(zip(*dedup, strict=True)) == {"doc_retrieved": 2, "domain_retrieved": 0, "none": total - 2}
    # The CJK font the labels need is installed and usable by the page.
    assert browser.execute_script("return document.fonts.check('16px \"WenQuanYi Micro Hei\"')")
    assert "没有这个文档" in browser.find_element("id", "table-not-found").text

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "dashboard.png"
    shot.unlink(missing_ok=True)
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000

    # Clicking the REFERENCE bar (a real mouse click on the drawn bar) opens the list of exactly those calls.
    from selenium.webdriver.common.action_chains import ActionChains

    bars = browser.find_elements("css selector", "#chart-relevance g.point path")
    ActionChains(browser).move_to_element(bars[drawn["x"].index("REFERENCE")]).pause(0.3).click().perform()
    wait_for(browser, "return document.body.classList.contains('change-list')")
    assert "level=REFERENCE" in browser.current_url
    counter = browser.find_element("css selector", "#changelist-form .paginator").text
    assert counter.startswith("5 ")
    # The charts above the list follow its filter: only the REFERENCE bar is up.
    wait_for(
        browser,
        "const el = document.getElementById('chart-relevance'); return el && el.dataset.drawn === '1';",
    )
    listed = browser.execute_script(
        "const gd = document.getElementById('chart-relevance'); return [gd._fullData[0].x, gd._fullData[0].y];"
    )
    assert dict(zip(*listed, strict=True)) == {label: 5 if label == "REFERENCE" else 0 for label in SEEDED}
    browser.save_screenshot(str(SCREENSHOTS / "invocations.png"))


def test_thumbs_on_an_invocation_feed_the_calibration_chart(browser, live_server, seeded_calls):
    from django.contrib.auth import get_user_model

    from observability.models import InvocationFeedback, ToolInvocation

    # Agents' judgements: helpful from 0.6 up, unhelpful below, from four agents in turn (a
    # suggestion needs three agents or more, none counting above a third).
    voters = [get_user_model().objects.create(username=f"voter-{i}") for i in range(4)]
    votes = 0
    for similarity, helpful, n in [(0.35, False, 8), (0.55, False, 4), (0.62, True, 6), (0.81, True, 10)]:
        for _ in range(n):
            InvocationFeedback.objects.create(
                invocation=ToolInvocationFactory(similarity=similarity),
                source="AGENT",
                helpful=helpful,
                user=voters[votes % 4],
            )
            votes += 1
    admin_login(browser, live_server)

    invocation = ToolInvocation.objects.filter(relevance_level="REFERENCE").first()
    browser.get(live_server.url + reverse("admin:observability_toolinvocation_change", args=[invocation.pk]))
    assert "当前结果为相关参考" in browser.find_element("id", "invocation-readable").text
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "invocation.png"))
    browser.find_element("css selector", "#feedback-form button[value='1']").click()
    wait_for(browser, "return document.querySelector('#feedback-list') !== null")
    assert InvocationFeedback.objects.get(invocation=invocation, source="STAFF").helpful is True

    browser.get(live_server.url + reverse("admin:observability_thresholdcalibration_changelist"))
    wait_for(
        browser,
        "const el = document.getElementById('chart-calibration'); return el && el.dataset.drawn === '1';",
    )
    drawn = browser.execute_script(
        "const gd = document.getElementById('chart-calibration');"
        "const sum = t => t.y.reduce((a, b) => a + b, 0);"
        "return [sum(gd._fullData[0]), sum(gd._fullData[1])];"
    )
    assert drawn == [6 + 10 + 1, 8 + 4]  # helpful (the staff thumb included), not helpful
    assert browser.find_element("id", "suggested-reference").text == "0.60"
    browser.save_screenshot(str(SCREENSHOTS / "calibration.png"))


def test_hit_testing_page_in_the_browser(browser, live_server, seeded_calls, vector_store, settings):
    from knowledge.embeddings import get_embedder
    from retrieval.lookup.keyword_index import keyword_index_forget
    from tests.retrieval.conftest import Corpus, seed_documents

    settings.RETRIEVAL_INDEX_REFRESH_MS = 0
    settings.RETRIEVAL_LEVELS = "thresholds"  # the seeds' scenario: its level by the seeds' rule
    keyword_index_forget()
    embedder = get_embedder()
    vector_store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    seed_documents(Corpus(vector_store))
    admin_login(browser, live_server)
    browser.get(live_server.url + reverse("admin:observability_hittest_changelist"))
    browser.find_element("name", "query").send_keys("数据库连接池配置")
    browser.find_element("css selector", "#hit-test-form input[type=submit]").click()
    wait_for(browser, "return document.getElementById('hit-l1') !== null")
    assert browser.find_element("id", "hit-level").text == "HIGHLY_RELEVANT"
    assert "infrastructure/mysql-pool.md" in browser.find_element("id", "hit-l1").text
    browser.save_screenshot(str(SCREENSHOTS / "hit_testing.png"))
    keyword_index_forget()
