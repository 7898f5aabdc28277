"""The admin in Simplified Chinese and English: every page agentkb adds, the language switcher,
localised dates, and the compiled catalogue in step with its source."""

import re
from pathlib import Path

import polib
import pytest
from django.urls import reverse

from knowledge.models import ApiDocument, KnowledgeDomain
from observability.models import ToolInvocation
from tests.conftest import REPO

LOCALE = Path(REPO) / "locale" / "zh_Hans" / "LC_MESSAGES"

# page -> (a string only the English page shows, the Chinese page's counterpart)
PAGES = {
    "admin:observability_retrievaldashboard_changelist": (
        "Most frequent queries that ended not found",
        "最常见的未命中查询",
    ),
    "admin:observability_hittest_changelist": (
        "Runs the real lookup without side effects",
        "执行真实检索但没有副作用",
    ),
    "admin:observability_thresholdcalibration_changelist": (
        "none: the settings are in force",
        "无：当前使用配置中的阈值",
    ),
    "admin:observability_toolinvocation_changelist": (
        "Search by session id or query text.",
        "按会话 ID 或查询文本搜索。",
    ),
    "admin:knowledge_apidocument_changelist": ("Upload files or a zip", "上传文件或 zip"),
    "admin:knowledge_apidocument_bulk_upload": ("Upload documents", "上传文档"),
    "admin:knowledge_knowledgedomain_changelist": (
        "Regenerate now (ignore the debounce window)",
        "立即重新生成",
    ),
    "admin:index": ("Threshold calibration", "阈值校准"),
}


@pytest.fixture
def seeded(db):
    KnowledgeDomain.objects.create(domain_id="infrastructure", description="Infra")
    ApiDocument.objects.create(
        doc_key="infra/db.md", title="DB pool", domain="infrastructure", content="x", content_hash="h"
    )
    return ToolInvocation.objects.create(
        session_id="s1",
        tool_name="lookup_knowledge",
        relevance_level="PRECISE",
        retrieval_details={"returned_doc_keys": ["infra/db.md"], "returned_domains": ["infrastructure"]},
    )


@pytest.mark.parametrize("name", PAGES)
def test_each_page_speaks_chinese_in_zh_hans_and_english_in_en(admin_client, seeded, name):
    english, chinese = PAGES[name]
    zh = admin_client.get(reverse(name), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    en = admin_client.get(reverse(name), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert chinese in zh and english not in zh
    assert english in en and chinese not in en
    assert '<html lang="zh-hans"' in zh and '<html lang="en"' in en


def test_an_invocation_page_in_both_languages(admin_client, seeded):
    url = reverse("admin:observability_toolinvocation_change", args=[seeded.pk])
    zh = admin_client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    en = admin_client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Agent 的查询与得到的结果" in zh and "结果有用吗？" in zh
    assert "What the agent asked and got" in en and "Did this result help?" in en


def test_a_browser_asking_for_zh_cn_gets_simplified_chinese(admin_client, seeded):
    page = admin_client.get(
        reverse("admin:observability_hittest_changelist"), HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9"
    )
    assert "命中测试" in page.content.decode()


def test_the_language_switcher_changes_the_language_of_the_next_page(admin_client, seeded):
    dashboard = reverse("admin:observability_retrievaldashboard_changelist")
    page = admin_client.get(dashboard).content.decode()
    assert 'id="language-switcher"' in page and 'value="zh-hans"' in page and "简体中文" in page

    response = admin_client.post(reverse("set_language"), {"language": "zh-hans", "next": dashboard})
    assert response.status_code == 302 and response["Location"] == dashboard
    assert "检索仪表盘" in admin_client.get(dashboard).content.decode()

    admin_client.post(reverse("set_language"), {"language": "en", "next": dashboard})
    assert "Retrieval dashboard" in admin_client.get(dashboard).content.decode()


def test_dates_follow_the_language(admin_client, seeded):
    url = reverse("admin:observability_retrievaldashboard_changelist") + "?range=custom"
    url += "&start=2026-03-04T05:06&end=2026-03-05T05:06"
    zh = admin_client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    en = admin_client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    range_zh = re.search(r'id="dashboard-range">([^<]*)', zh).group(1)
    range_en = re.search(r'id="dashboard-range">([^<]*)', en).group(1)
    assert "2026年3月4日 05:06" in range_zh  # zh-hans SHORT_DATETIME_FORMAT
    assert "03/04/2026 5:06 a.m." in range_en  # en SHORT_DATETIME_FORMAT "m/d/Y P"
    assert "工具" in range_zh and "tool" in range_en


def test_the_compiled_catalogue_matches_its_source():
    po = polib.pofile(str(LOCALE / "django.po"))
    mo = {entry.msgid: entry for entry in polib.mofile(str(LOCALE / "django.mo"))}
    untranslated = {e.msgid for e in po if not e.translated()}
    # Django's own catalogue translates these; everything else is agentkb's to translate.
    assert untranslated <= {"Home", "Django site admin", "Django administration"}
    for entry in po.translated_entries():
        compiled = mo.get(entry.msgid)
        assert compiled is not None, f"not compiled (run compilemessages): {entry.msgid!r}"
        assert (compiled.msgstr_plural or compiled.msgstr) == (entry.msgstr_plural or entry.msgstr), (
            entry.msgid
        )


def test_the_calibration_suggestion_is_explained_in_the_page_language(admin_client, seeded):
    url = reverse("admin:observability_thresholdcalibration_changelist")
    zh = admin_client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    en = admin_client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "有相似度的反馈 0 条；至少需要 20 条" in zh
    assert "0 judgements with a similarity; at least 20 are needed" in en
