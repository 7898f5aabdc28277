"""Every staff page in headless Chromium at 1440 x 900, over seeded calls that include hostile
rows (tests/observability/test_hostile_rows.py): no page is wider than the viewport, the
dashboard shows the tool it names and Dify's own outcome, an invocation explains its level.
Screenshots go to var/screenshots/ (listed in docs/observability.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge.models import ApiDocument, KnowledgeDomain
from observability.models import InvocationFeedback, ToolInvocation
from tests.conftest import REPO
from tests.observability.factories import ToolInvocationFactory
from tests.observability.test_hostile_rows import HOSTILE_VALUES, hostile_rows
from tests.support.browser import BROWSER_MARKS, admin_login, chromium, wait_for

SCREENSHOTS = REPO / "var" / "screenshots"
HOSTILE_AGENT_NAME = "<b>x</b>" + "e" + "\u0301" * 80 + "🔥" * 60
WIDTH, HEIGHT = 1440, 900

pytestmark = BROWSER_MARKS


@pytest.fixture
def browser():
    with chromium(width=WIDTH, height=HEIGHT) as driver:
        yield driver


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


def _overflow(browser) -> dict:
    return browser.execute_script(
        "const d = document.documentElement;"
        "const wide = Array.from(document.querySelectorAll('#content *')).filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
        ".slice(0, 3).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));"
        "return {scroll: d.scrollWidth, viewport: window.innerWidth, wide: wide};"
    )


def test_no_staff_page_is_wider_than_the_viewport(browser, live_server, seeded):
    admin_login(browser, live_server)
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
        wait_for(browser, "return document.readyState === 'complete'")
        wait_for(
            browser,
            "return Array.from(document.querySelectorAll('[data-figure]')).every(e => e.dataset.drawn === '1')",
        )
        measured = _overflow(browser)
        if measured["scroll"] > measured["viewport"]:
            too_wide[name] = measured
        browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    assert too_wide == {}


def test_dashboard_tool_dify_outcome_and_first_visit_load(browser, live_server, seeded):
    admin_login(browser, live_server)
    url = live_server.url + reverse("admin:observability_retrievaldashboard_changelist")
    browser.get(url)
    wait_for(
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
    wait_for(browser, "return location.search.includes('range=7d')")
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
    admin_login(browser, live_server)
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


def _english_msgids() -> set[str]:
    """Every catalogue msgid whose Chinese differs, as written and capitalised as the admin shows
    a field label or a choice ("Created at", "Indexed"); texts that are also a translation
    ("Agent") are left out."""
    import polib

    from tests.config.test_i18n_complete import CATALOGUE

    entries = polib.pofile(str(CATALOGUE))
    english = {e.msgid.strip() for e in entries if e.msgstr and e.msgstr != e.msgid}
    english |= {text[:1].upper() + text[1:] for text in english}
    return english - {e.msgstr.strip() for e in entries if e.msgstr}


# What the Chinese runs read on a page: labels, headers, filters, cells, values, titles, sidebar.
_LABELS_JS = (
    "return Array.from(document.querySelectorAll('#content label, #content th, #content h2, #content h3,"
    " #content .okb-label, #content summary, #content .okb-nav a, #changelist-filter h3, #dashboard-empty,"
    " #changelist-filter li a, #result_list td, #content .readonly, #content-main h1, #site-name,"
    " #content .breadcrumbs a, #nav-sidebar a, .breadcrumbs, #content dt, .okb-hit-facts dd, .okb-hit-mark'))"
    ".map(e => e.textContent.trim().replace(/:$/, ''));"
)


def test_in_chinese_no_label_is_left_in_english(browser, live_server, seeded):
    english = _english_msgids()
    document = ApiDocument.objects.get(doc_key="infrastructure/broken.md")
    domain = KnowledgeDomain.objects.get(domain_id="infrastructure")
    admin_login(browser, live_server)
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "language-select")).select_by_value("zh-hans")
    wait_for(browser, "return document.documentElement.lang === 'zh-hans'")
    pages = {
        "dashboard_zh": reverse("admin:observability_retrievaldashboard_changelist")
        + "?range=24h&tool=__all__",
        "invocations_zh": reverse("admin:observability_toolinvocation_changelist"),
        "admin_index_zh": reverse("admin:index"),
        "hit_testing_zh": reverse("admin:observability_hittest_changelist"),
        "documents_zh": reverse("admin:knowledge_apidocument_changelist"),
        "document_zh": reverse("admin:knowledge_apidocument_change", args=[document.pk]),
        "document_add_zh": reverse("admin:knowledge_apidocument_add"),
        "domains_zh": reverse("admin:knowledge_knowledgedomain_changelist"),
        "domain_zh": reverse("admin:knowledge_knowledgedomain_change", args=[domain.pk]),
        "feedback_zh": reverse("admin:observability_invocationfeedback_changelist"),
        "calibration_zh": reverse("admin:observability_thresholdcalibration_changelist"),
    }
    untranslated = {}
    for name, url in pages.items():
        browser.get(live_server.url + url)
        wait_for(browser, "return document.readyState === 'complete'")
        texts = browser.execute_script(_LABELS_JS)
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
    admin_login(browser, live_server)
    browser.get(live_server.url + reverse("admin:knowledge_apidocument_changelist"))
    badge = f"document.querySelector('[data-doc-id=\"{document.pk}\"]')"
    assert browser.execute_script(f"return {badge}.dataset.docStatus") == "INDEXING"
    browser.execute_script("window.__notReloaded = true")
    # What the worker does when indexing ends.
    ApiDocument.objects.filter(pk=document.pk).update(status="FAILED", error="parse error: line 3")
    wait_for(browser, f"return {badge}.dataset.docStatus === 'FAILED'", timeout=20)
    assert browser.execute_script("return window.__notReloaded === true")
    assert "parse error: line 3" in browser.execute_script(f"return {badge}.textContent")
    browser.save_screenshot(str(SCREENSHOTS / "documents_status.png"))
    browser.get(live_server.url + reverse("admin:knowledge_apidocument_change", args=[document.pk]))
    assert browser.find_element("css selector", "#reindex-form button").text == "Re-index"


def test_staff_filter_the_dashboard_by_agent_and_read_its_breakdown(browser, live_server, seeded):
    from django.contrib.auth import get_user_model
    from selenium.webdriver.support.ui import Select

    hostile = get_user_model().objects.get(username=HOSTILE_AGENT_NAME)
    admin_login(browser, live_server)
    url = live_server.url + reverse("admin:observability_retrievaldashboard_changelist")
    browser.get(url + "?range=24h")
    wait_for(browser, "return document.querySelectorAll('#table-agents tbody tr').length > 0")
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('#table-agents tbody tr')).map(r => r.dataset.agent)"
    )
    assert str(hostile.pk) in rows and "0" in rows and len(rows) == 3
    # The hostile name is text, clipped, the whole name (tamed) on hover; nothing widens the page.
    cell = browser.find_element("css selector", f'#table-agents tr[data-agent="{hostile.pk}"] td .okb-clip')
    assert cell.text.startswith("<b>x</b>e") and cell.text.endswith("…")
    assert cell.get_attribute("title").startswith("<b>x</b>e\u0301\u0301\u0301🔥")
    assert browser.execute_script("return document.querySelector('#table-agents b') === null")
    wait_for(
        browser,
        "return Array.from(document.querySelectorAll('[data-figure]')).every(e => e.dataset.drawn === '1')",
    )
    assert _overflow(browser)["scroll"] <= WIDTH
    browser.save_screenshot(str(SCREENSHOTS / "dashboard_agents.png"))

    # Filter by the hostile agent with the toolbar's Agent choice.
    Select(browser.find_element("name", "agent")).select_by_value(str(hostile.pk))
    browser.find_element("css selector", "#dashboard-filters input[type=submit]").click()
    wait_for(browser, f"return location.search.includes('agent={hostile.pk}')")
    wait_for(browser, "return document.querySelectorAll('#table-agents tbody tr').length === 1")
    expected = ToolInvocation.objects.filter(agent=hostile, tool_name="lookup_knowledge").count()
    assert browser.find_element("id", "card-calls").text == str(expected)
    assert browser.execute_script("return document.querySelector('select[name=agent]').value") == str(
        hostile.pk
    )

    # The latency chart draws p50 and p95 as the figure in the page says.
    wait_for(browser, "return document.getElementById('chart-latency-time').dataset.drawn === '1'")
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
    wait_for(browser, f"return location.search.includes('agent={honest.pk}')")
    assert browser.find_element("id", "card-calls").text == str(
        ToolInvocation.objects.filter(agent=honest, tool_name="lookup_knowledge").count()
    )
    wait_for(
        browser,
        "return Array.from(document.querySelectorAll('[data-figure]')).every(e => e.dataset.drawn === '1')",
    )
    browser.save_screenshot(str(SCREENSHOTS / "dashboard_one_agent.png"))


def test_hit_testing_with_top_k_a_domain_and_an_agent(browser, live_server, seeded, vector_store, settings):
    """Hit testing in the browser: top_k, a domain and an agent chosen in the form, chunk-text cards
    back (a hostile chunk among them), nothing wider than the viewport."""
    from selenium.webdriver.support.ui import Select

    from knowledge.embeddings import get_embedder
    from knowledge.models import DocumentChunk
    from retrieval.agents.tokens import tool_token_issue
    from retrieval.lookup.keyword_index import keyword_index_forget
    from tests.observability.test_hostile_rows import COMBINING
    from tests.retrieval.conftest import Corpus, seed_documents

    settings.RETRIEVAL_INDEX_REFRESH_MS = 0
    keyword_index_forget()
    embedder = get_embedder()
    vector_store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    ApiDocument.objects.filter(doc_key="infrastructure/mysql-pool.md").delete()  # the seeded stand-in
    seed_documents(Corpus(vector_store))
    KnowledgeDomain.objects.get_or_create(domain_id="troubleshooting")
    DocumentChunk.objects.filter(document__doc_key="infrastructure/mysql-pool.md", chunk_index=1).update(
        content="<script>alert(1)</script>" + COMBINING + "长" * 3000, pages="7"
    )
    tool_token_issue(name="agent-" + "w" * 140)  # a long name (150 at most)
    admin_login(browser, live_server)
    browser.get(live_server.url + reverse("admin:observability_hittest_changelist"))
    browser.find_element("name", "query").send_keys("数据库连接池配置")
    browser.find_element("name", "top_k").send_keys("8")
    Select(browser.find_element("name", "domains")).select_by_value("infrastructure")
    Select(browser.find_element("name", "agent")).select_by_index(1)
    browser.find_element("css selector", "#hit-test-form input[type=submit]").click()
    wait_for(browser, "return document.getElementById('hit-l1') !== null")
    assert "top_k=8" in browser.current_url and "domains=infrastructure" in browser.current_url
    cards = browser.execute_script(
        "return Array.from(document.querySelectorAll('.okb-hit-card')).map(c => ["
        "c.dataset.docKey, c.querySelector('.okb-hit-text') ? c.querySelector('.okb-hit-text').textContent : '',"
        "c.querySelector('a') ? c.querySelector('a').href : '']);"
    )
    assert cards and all(key.startswith("infrastructure/") for key, _, _ in cards)
    assert any(
        text == "数据库连接池配置\n如何配置数据库连接池" and "/knowledge/apidocument/" in href
        for _, text, href in cards
    )
    assert any(text.startswith("<script>alert(1)</script>") for _, text, _ in cards)  # shown as text
    assert browser.execute_script(
        "return window.__xss === undefined && !document.querySelector('.okb-hit-text script')"
    )
    assert browser.find_element("id", "hit-domains").text.startswith("infrastructure")
    measured = _overflow(browser)
    assert measured["scroll"] <= measured["viewport"], measured
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOTS / "hit_testing_cards.png"))
    # The same test in Chinese: no label, mark or heading of the result left in English.
    Select(browser.find_element("id", "language-select")).select_by_value("zh-hans")
    wait_for(browser, "return document.documentElement.lang === 'zh-hans'")
    browser.get(
        live_server.url
        + reverse("admin:observability_hittest_changelist")
        + "?"
        + browser.execute_script(
            "return document.querySelector('#hit-recent a').getAttribute('href').slice(1)"
        )
    )
    wait_for(browser, "return document.getElementById('hit-l1') !== null")
    english = _english_msgids()
    left = sorted({t for t in browser.execute_script(_LABELS_JS) if t in english})
    assert left == []
    browser.execute_script("document.getElementById('hit-l1').scrollIntoView()")
    browser.save_screenshot(str(SCREENSHOTS / "hit_testing_cards_zh.png"))
    keyword_index_forget()


def test_the_add_form_keeps_the_chosen_file_through_an_error_elsewhere(
    browser, live_server, seeded, vector_store, tmp_path
):
    """A browser empties a file input on every page load and no page may refill it: the server
    holds the file and the form says so; the corrected form, file input left empty, uploads it."""
    chosen = tmp_path / "browser-pool.md"
    chosen.write_text("# 浏览器上传\n\n最大连接数 20。", encoding="utf-8")
    admin_login(browser, live_server)
    browser.get(live_server.url + reverse("admin:knowledge_apidocument_add"))
    browser.find_element("name", "file").send_keys(str(chosen))
    browser.find_element("name", "new_domain").send_keys("not a domain!")
    browser.find_element("name", "key").send_keys("infrastructure/browser-pool.md")
    browser.find_element("css selector", "input[name=_save]").click()
    wait_for(browser, "return document.getElementById('held-file') !== null")
    assert browser.execute_script("return document.querySelector('input[name=file]').files.length") == 0
    assert "browser-pool.md" in browser.find_element("id", "held-file").text
    assert browser.find_element("name", "key").get_attribute("value") == "infrastructure/browser-pool.md"
    assert browser.find_element("name", "new_domain").get_attribute("value") == "not a domain!"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "document_add_file_kept.png"))
    field = browser.find_element("name", "new_domain")
    field.clear()
    field.send_keys("infrastructure")
    browser.find_element("css selector", "input[name=_save]").click()
    wait_for(browser, "return document.getElementById('reindex-form') !== null")
    assert ApiDocument.objects.get(doc_key="infrastructure/browser-pool.md").title == "浏览器上传"


def test_the_domains_table_fits_and_a_domain_page_lists_its_documents(browser, live_server, seeded):
    KnowledgeDomain.objects.filter(domain_id="forgotten").update(
        description="很长的描述" * 50, last_error="regeneration failed: " + "x" * 2000
    )
    admin_login(browser, live_server)
    browser.get(live_server.url + reverse("admin:knowledge_knowledgedomain_changelist"))
    fit = browser.execute_script(
        "const t = document.getElementById('result_list'); const box = t.closest('.results');"
        "return {table: t.scrollWidth, box: box.clientWidth, page: document.documentElement.scrollWidth};"
    )
    assert fit["table"] <= fit["box"] and fit["page"] <= WIDTH, fit
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "domains.png"))
    domain = KnowledgeDomain.objects.get(domain_id="infrastructure")
    browser.get(live_server.url + reverse("admin:knowledge_knowledgedomain_change", args=[domain.pk]))
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('#domain-documents tbody tr')).map(r => ["
        "r.querySelector('a').href, r.cells[1].textContent, r.cells[2].textContent]);"
    )
    assert sorted((key, status) for _, key, status in rows) == [
        ("infrastructure/broken.md", "Failed"),
        ("infrastructure/mysql-pool.md", "Pending"),
    ]
    assert all("/admin/knowledge/apidocument/" in href for href, _, _ in rows)
    assert _overflow(browser)["scroll"] <= WIDTH
    browser.save_screenshot(str(SCREENSHOTS / "domain_documents.png"))
    # A failed document's page: its long reason beside the buttons leaves the form its width.
    broken = ApiDocument.objects.get(doc_key="infrastructure/broken.md")
    browser.get(live_server.url + reverse("admin:knowledge_apidocument_change", args=[broken.pk]))
    widths = browser.execute_script(
        "return [document.querySelector('fieldset').getBoundingClientRect().width,"
        " document.getElementById('content-main').getBoundingClientRect().width];"
    )
    assert widths[0] >= widths[1] * 0.9, widths
    assert browser.find_element("id", "document-status").get_attribute("title").startswith("parse error: ")
    browser.save_screenshot(str(SCREENSHOTS / "document_failed.png"))
