"""Every staff page in headless Chromium at 1440 x 900, over seeded calls that include hostile
rows (tests/observability/test_hostile_rows.py): no page is wider than the viewport, the
dashboard shows the tool it names and Dify's own outcome, an invocation explains its level.
Screenshots go to var/screenshots/ (listed in docs/observability.md)."""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge.models import ApiDocument, KnowledgeDomain
from observability.models import InvocationFeedback, ToolInvocation
from tests.conftest import REPO
from tests.observability.factories import ToolInvocationFactory
from tests.observability.test_hostile_rows import HOSTILE_VALUES, hostile_rows

SCREENSHOTS = REPO / "var" / "screenshots"
HOSTILE_AGENT_NAME = "<b>x</b>" + "e" + "\u0301" * 80 + "🔥" * 60
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WIDTH, HEIGHT = 1440, 900

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (CHROMIUM and CHROMEDRIVER), reason="headless Chromium not installed (.ci/run installs it)"
    ),
]


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="agentkb-chromium-")
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--window-size={WIDTH},{HEIGHT}",
        "--lang=en-US",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def seeded(transactional_db, django_user_model):
    django_user_model.objects.create_superuser("browser-admin", "b@example.com", "browser-pass-123")
    KnowledgeDomain.objects.create(domain_id="infrastructure", description="基础设施")
    KnowledgeDomain.objects.create(domain_id="forgotten", description="没有文档的领域")
    ApiDocument.objects.create(
        doc_key="infrastructure/mysql-pool.md", title="连接池", domain="infrastructure", content="x"
    )
    ApiDocument.objects.create(
        doc_key="infrastructure/broken.md",
        title="坏文件",
        domain="infrastructure",
        content="x",
        status="FAILED",
        error="parse error: " + "x" * 400,
    )
    now = timezone.now()
    # Two agents: an honest one and one whose name (stored directly, as no token would allow)
    # is markup, a tower of combining marks and emoji.
    agents = [
        django_user_model.objects.create(username="honest-agent"),
        django_user_model.objects.create(username=HOSTILE_AGENT_NAME),
        None,
    ]
    for n, (level, similarity) in enumerate(
        [("PRECISE", 0.97), ("HIGHLY_RELEVANT", 0.82), ("REFERENCE", 0.61), (None, 0.31), ("DEDUPED", 0.88)]
        * 3
    ):
        ToolInvocationFactory(
            relevance_level=level,
            dedup_reason="doc_retrieved" if level == "DEDUPED" else None,
            similarity=similarity,
            created_at=now - timedelta(minutes=5 + 7 * n),
            session_id=f"s{n % 4}",
            query="数据库连接池怎么配置" if level else "没有这个文档",
            agent=agents[n % 3],
            duration_ms=10 + 5 * n,
        )
    for i, keys in enumerate([["infrastructure/mysql-pool.md"], [], ["a", "b"]]):
        ToolInvocation.objects.create(
            tool_name="dify_retrieval",
            session_id="dify",
            request={"query": "支付失败", "source": "dify"},
            retrieval_details={"returned_doc_keys": keys},
            created_at=now - timedelta(minutes=3 + i),
        )
    rows = hostile_rows(now=now)
    InvocationFeedback.objects.create(
        invocation=rows[0], source="AGENT", helpful=False, comment="e" + "\u0301" * 300
    )
    return rows


def _wait(driver, condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(condition)
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for: {condition}")


def _login(browser, live_server) -> None:
    browser.get(live_server.url + reverse("admin:login"))
    browser.find_element("name", "username").send_keys("browser-admin")
    browser.find_element("name", "password").send_keys("browser-pass-123")
    browser.find_element("css selector", "input[type=submit]").click()
    _wait(browser, "return document.body.classList.contains('dashboard')")


def _overflow(browser) -> dict:
    return browser.execute_script(
        "const d = document.documentElement;"
        "const wide = Array.from(document.querySelectorAll('#content *')).filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
        ".slice(0, 3).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));"
        "return {scroll: d.scrollWidth, viewport: window.innerWidth, wide: wide};"
    )


def test_no_staff_page_is_wider_than_the_viewport(browser, live_server, seeded):
    _login(browser, live_server)
    hostile = next(
        r for r in seeded if isinstance(r.request, dict) and r.request.get("query") == "e" + "\u0301" * 300
    )
    pages = {
        "admin_index": reverse("admin:index"),
        "invocations": reverse("admin:observability_toolinvocation_changelist"),
        "invocation_hostile": reverse("admin:observability_toolinvocation_change", args=[hostile.pk]),
        "dashboard_all_tools": reverse("admin:observability_retrievaldashboard_changelist")
        + "?range=24h&tool=__all__",
        "feedback": reverse("admin:observability_invocationfeedback_changelist"),
        "documents": reverse("admin:knowledge_apidocument_changelist"),
        "domains": reverse("admin:knowledge_knowledgedomain_changelist"),
        "calibration": reverse("admin:observability_thresholdcalibration_changelist"),
        "hit_testing_empty": reverse("admin:observability_hittest_changelist"),
    }
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    too_wide = {}
    for name, url in pages.items():
        browser.get(live_server.url + url)
        _wait(browser, "return document.readyState === 'complete'")
        _wait(
            browser,
            "return Array.from(document.querySelectorAll('[data-figure]')).every(e => e.dataset.drawn === '1')",
        )
        measured = _overflow(browser)
        if measured["scroll"] > measured["viewport"]:
            too_wide[name] = measured
        browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    assert too_wide == {}


def test_dashboard_tool_dify_outcome_and_first_visit_load(browser, live_server, seeded):
    _login(browser, live_server)
    url = live_server.url + reverse("admin:observability_retrievaldashboard_changelist")
    browser.get(url)
    _wait(
        browser,
        "return Array.from(document.querySelectorAll('[data-figure]')).every(e => e.dataset.drawn === '1')",
    )
    load_ms = browser.execute_script(
        "const t = performance.getEntriesByType('navigation')[0]; return Math.round(t.loadEventEnd - t.startTime);"
    )
    drawn_ms = browser.execute_script("return Math.round(window.okbChartsDrawnAt)")
    # Not the production figure: this server sends plotly.js uncompressed (bench/pages.py
    # measures it served as in production).
    print(f"\ndashboard first visit (test server): load event at {load_ms} ms, charts drawn at {drawn_ms} ms")
    assert (
        browser.execute_script("return document.querySelector('select[name=tool]').value")
        == "lookup_knowledge"
    )
    # Changing only the range keeps the tool.
    browser.execute_script("document.querySelector('select[name=range]').value = '7d'")
    browser.find_element("css selector", "#dashboard-filters input[type=submit]").click()
    _wait(browser, "return location.search.includes('range=7d')")
    assert (
        browser.execute_script("return document.querySelector('select[name=tool]').value")
        == "lookup_knowledge"
    )
    assert "dify-outcome" not in browser.page_source
    browser.get(url + "?range=24h&tool=__all__")
    # Two seeded Dify calls with records, plus one per hostile value (each names one "record").
    assert browser.find_element("id", "dify-records").text == str(2 + len(HOSTILE_VALUES))
    assert browser.find_element("id", "dify-none").text == "1"
    browser.get(url + "?range=24h&tool=dify_retrieval")
    browser.save_screenshot(str(SCREENSHOTS / "dashboard_dify.png"))


def test_an_invocation_explains_its_level(browser, live_server, seeded):
    _login(browser, live_server)
    invocation = (
        ToolInvocation.objects.filter(
            relevance_level__isnull=True, tool_name="lookup_knowledge", status="SUCCESS"
        )
        .exclude(session_id__startswith="s-")
        .first()
    )
    browser.get(live_server.url + reverse("admin:observability_toolinvocation_change", args=[invocation.pk]))
    sentence = browser.find_element("id", "invocation-explanation").text
    # The seeded record holds no thresholds of its own (a real lookup's does: see
    # test_invocation_page.py for "below REFERENCE 0.50").
    assert sentence.startswith("Best similarity 0.31 is below the REFERENCE threshold, so not found.")
    assert _overflow(browser)["scroll"] <= WIDTH
    browser.save_screenshot(str(SCREENSHOTS / "invocation_explained.png"))


def test_in_chinese_no_label_is_left_in_english(browser, live_server, seeded):
    import polib

    from tests.config.test_i18n_complete import CATALOGUE

    english = {e.msgid.strip() for e in polib.pofile(str(CATALOGUE)) if e.msgstr and e.msgstr != e.msgid}
    _login(browser, live_server)
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "language-select")).select_by_value("zh-hans")
    _wait(browser, "return document.documentElement.lang === 'zh-hans'")
    pages = {
        "dashboard_zh": reverse("admin:observability_retrievaldashboard_changelist")
        + "?range=24h&tool=__all__",
        "invocations_zh": reverse("admin:observability_toolinvocation_changelist"),
        "admin_index_zh": reverse("admin:index"),
    }
    untranslated = {}
    for name, url in pages.items():
        browser.get(live_server.url + url)
        _wait(browser, "return document.readyState === 'complete'")
        texts = browser.execute_script(
            "return Array.from(document.querySelectorAll('#content label, #content th, #content h2, #content h3,"
            " #content .okb-label, #content summary, #content .okb-nav a, #changelist-filter h3, #dashboard-empty'))"
            ".map(e => e.textContent.trim().replace(/:$/, ''));"
        )
        left = sorted({t for t in texts if t in english})
        if left:
            untranslated[name] = left
        browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    assert untranslated == {}


def test_a_document_status_changes_without_a_reload(browser, live_server, seeded):
    document = ApiDocument.objects.create(
        doc_key="infrastructure/new.md",
        title="新文档",
        domain="infrastructure",
        content="x",
        status="INDEXING",
    )
    _login(browser, live_server)
    browser.get(live_server.url + reverse("admin:knowledge_apidocument_changelist"))
    badge = f"document.querySelector('[data-doc-id=\"{document.pk}\"]')"
    assert browser.execute_script(f"return {badge}.dataset.docStatus") == "INDEXING"
    browser.execute_script("window.__notReloaded = true")
    # What the worker does when indexing ends.
    ApiDocument.objects.filter(pk=document.pk).update(status="FAILED", error="parse error: line 3")
    _wait(browser, f"return {badge}.dataset.docStatus === 'FAILED'", timeout=20)
    assert browser.execute_script("return window.__notReloaded === true")
    assert "parse error: line 3" in browser.execute_script(f"return {badge}.textContent")
    browser.save_screenshot(str(SCREENSHOTS / "documents_status.png"))
    browser.get(live_server.url + reverse("admin:knowledge_apidocument_change", args=[document.pk]))
    assert browser.find_element("css selector", "#reindex-form button").text == "Re-index"


def test_staff_filter_the_dashboard_by_agent_and_read_its_breakdown(browser, live_server, seeded):
    from django.contrib.auth import get_user_model
    from selenium.webdriver.support.ui import Select

    hostile = get_user_model().objects.get(username=HOSTILE_AGENT_NAME)
    _login(browser, live_server)
    url = live_server.url + reverse("admin:observability_retrievaldashboard_changelist")
    browser.get(url + "?range=24h")
    _wait(browser, "return document.querySelectorAll('#table-agents tbody tr').length > 0")
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('#table-agents tbody tr')).map(r => r.dataset.agent)"
    )
    assert str(hostile.pk) in rows and "0" in rows and len(rows) == 3
    # The hostile name is text, clipped, the whole name (tamed) on hover; nothing widens the page.
    cell = browser.find_element("css selector", f'#table-agents tr[data-agent="{hostile.pk}"] td .okb-clip')
    assert cell.text.startswith("<b>x</b>e") and cell.text.endswith("…")
    assert cell.get_attribute("title").startswith("<b>x</b>e\u0301\u0301\u0301🔥")
    assert browser.execute_script("return document.querySelector('#table-agents b') === null")
    _wait(
        browser,
        "return Array.from(document.querySelectorAll('[data-figure]')).every(e => e.dataset.drawn === '1')",
    )
    assert _overflow(browser)["scroll"] <= WIDTH
    browser.save_screenshot(str(SCREENSHOTS / "dashboard_agents.png"))

    # Filter by the hostile agent with the toolbar's Agent choice.
    Select(browser.find_element("name", "agent")).select_by_value(str(hostile.pk))
    browser.find_element("css selector", "#dashboard-filters input[type=submit]").click()
    _wait(browser, f"return location.search.includes('agent={hostile.pk}')")
    _wait(browser, "return document.querySelectorAll('#table-agents tbody tr').length === 1")
    expected = ToolInvocation.objects.filter(agent=hostile, tool_name="lookup_knowledge").count()
    assert browser.find_element("id", "card-calls").text == str(expected)
    assert browser.execute_script("return document.querySelector('select[name=agent]').value") == str(
        hostile.pk
    )

    # The latency chart draws p50 and p95 as the figure in the page says.
    _wait(browser, "return document.getElementById('chart-latency-time').dataset.drawn === '1'")
    drawn = browser.execute_script(
        "const el = document.getElementById('chart-latency-time');return el.data.map(t => [t.name, t.y]);"
    )
    import json

    figure = json.loads(browser.find_element("id", "figure-chart-latency-time").get_attribute("textContent"))
    assert drawn == [[t["name"], t["y"]] for t in figure["data"]]
    assert [name for name, _ in drawn] == ["p50", "p95"] and any(v is not None for v in drawn[1][1])

    # An agent's name in the breakdown narrows the dashboard to it.
    browser.get(url + "?range=24h")
    honest = get_user_model().objects.get(username="honest-agent")
    browser.find_element("css selector", f'#table-agents tr[data-agent="{honest.pk}"] td a').click()
    _wait(browser, f"return location.search.includes('agent={honest.pk}')")
    assert browser.find_element("id", "card-calls").text == str(
        ToolInvocation.objects.filter(agent=honest, tool_name="lookup_knowledge").count()
    )
    _wait(
        browser,
        "return Array.from(document.querySelectorAll('[data-figure]')).every(e => e.dataset.drawn === '1')",
    )
    browser.save_screenshot(str(SCREENSHOTS / "dashboard_one_agent.png"))
