"""The documents list in headless Chromium at 1400 px wide, with the demo corpus's titles and doc
keys and a failed document's long error: titles read as words (not one letter per line), every
column is inside the window, and after *Re-index* the badge and the status field agree."""

from __future__ import annotations

import pytest
from django.urls import reverse

from knowledge.models import ApiDocument
from tests.conftest import REPO
from tests.support.browser import BROWSER_MARKS, admin_login, chromium, wait_for

SCREENSHOTS = REPO / "var" / "screenshots"
WIDTH, HEIGHT = 1400, 900

pytestmark = BROWSER_MARKS

DEMO = [
    ("infrastructure/database-connection-pool.md", "MySQL 数据库连接池配置与连接耗尽排查", "INDEXED"),
    (
        "troubleshooting/service-503-after-deploy.md",
        "Service returns 503 right after a deployment",
        "INDEXED",
    ),
    (
        "api-errors/error-code-reference.md",
        "API error code reference (ERR_QUOTA_EXCEEDED, ERR_FORBIDDEN)",
        "PENDING",
    ),
    ("payment/payment-callback-signature.md", "支付回调验签失败处理", "INDEXING"),
]


@pytest.fixture
def browser():
    with chromium(width=WIDTH, height=HEIGHT) as driver:
        yield driver


@pytest.fixture
def documents(transactional_db, django_user_model):
    django_user_model.objects.create_superuser("browser-admin", "b@example.com", "browser-pass-123")
    made = [
        ApiDocument.objects.create(
            doc_key=key, title=title, domain=key.split("/")[0], content="x", status=status
        )
        for key, title, status in DEMO
    ]
    made.append(
        ApiDocument.objects.create(
            doc_key="payment/a-very-long-file-name-that-someone-exported-from-confluence-2026-12-01.pdf",
            title="退款流程",
            domain="payment",
            content="x",
            status="FAILED",
            error="no text layer (scanned document?) " + "x" * 300,
        )
    )
    return made


def test_the_documents_list_reads_at_1400_px(browser, live_server, documents):
    admin_login(browser, live_server)
    browser.get(live_server.url + reverse("admin:knowledge_apidocument_changelist"))
    wait_for(browser, "return document.readyState === 'complete'")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "documents_1400.png"))
    measured = browser.execute_script(
        """
        const table = document.querySelector('#result_list');
        const titles = Array.from(table.querySelectorAll('tbody tr th a, tbody tr td.field-title a'));
        const cells = Array.from(table.querySelectorAll('thead th'));
        return {
          viewport: document.documentElement.clientWidth,
          scroll: document.documentElement.scrollWidth,
          tableRight: table.getBoundingClientRect().right,
          results: [table.parentElement.scrollWidth, table.parentElement.clientWidth],
          headers: cells.map(c => [c.textContent.trim(), Math.round(c.getBoundingClientRect().right)]),
          titleWidths: titles.map(a => Math.round(a.closest('th, td').getBoundingClientRect().width)),
          titleLines: titles.map(a => Math.round(a.getBoundingClientRect().height / parseFloat(getComputedStyle(a).lineHeight || 16))),
        };
        """
    )
    assert measured["scroll"] <= measured["viewport"], measured
    assert all(right <= measured["viewport"] for _name, right in measured["headers"]), measured
    # Not cut inside its box either (the admin scrolls a too-wide table within it).
    assert measured["results"][0] <= measured["results"][1], measured
    assert len(measured["titleWidths"]) == len(documents)
    # A title gets room for words (before: 26 px wide, 16 lines for a 60-character title).
    assert min(measured["titleWidths"]) >= 100, measured
    assert max(measured["titleLines"]) <= 5, measured


def test_after_reindex_the_badge_and_the_status_field_agree(browser, live_server, documents):
    # The page Re-index comes back to: the document PENDING, the worker still at it.
    failed = documents[-1]
    ApiDocument.objects.filter(pk=failed.pk).update(status="PENDING", error="")
    admin_login(browser, live_server)
    browser.get(live_server.url + reverse("admin:knowledge_apidocument_change", args=[failed.pk]))
    wait_for(browser, "return document.readyState === 'complete'")
    fields = (
        "return [document.getElementById('document-status').textContent.trim(),"
        " document.querySelector('.field-status_live .readonly').textContent.trim(),"
        " document.querySelector('.field-error_live .readonly').textContent.trim(),"
        " document.querySelector('.field-chunks_live .readonly').textContent.trim()];"
    )
    assert browser.execute_script(fields)[:2] == ["Pending", "Pending"]
    # What the worker does when indexing ends.
    ApiDocument.objects.filter(pk=failed.pk).update(status="INDEXED", error="", chunk_count=3)
    wait_for(
        browser,
        "return document.getElementById('document-status').dataset.docStatus === 'INDEXED'",
        timeout=20,
    )
    assert browser.execute_script(fields) == ["Indexed", "Indexed", "-", "3"]
