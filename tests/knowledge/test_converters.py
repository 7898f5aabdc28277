"""The converters on real files the tests make: structure kept (headings, lists, tables, pages),
metadata read, and every hostile file refused with its reason, in the sandbox's child process."""

import pytest

from knowledge.chunking import chunk_document
from knowledge.converters import ConversionError, Limits, convert
from knowledge.converters.sandbox import convert_isolated
from knowledge.converters.sniff import sniff
from tests.support import documents as files

LIMITS = Limits()


def test_a_pdf_keeps_its_headings_its_table_its_pages_and_its_properties():
    converted = convert(files.pdf_bytes(pages=3), fmt="pdf", limits=LIMITS)

    assert (converted.title, converted.keywords, converted.page_count) == (
        "支付失败排查手册",
        ["支付失败", "ERR_PAY_TIMEOUT"],
        3,
    )
    markdown = converted.markdown
    assert "# 第1章 支付超时 Chapter 1" in markdown.splitlines()
    assert "| 错误码 | 含义 | 处理 |\n| --- | --- | --- |\n| ERR_PAY_TIMEOUT | 支付超时 | 重试 |" in markdown
    assert markdown.index("<!-- page 2 -->") < markdown.index("第2章") < markdown.index("<!-- page 3 -->")

    chunks = chunk_document(markdown, target=300, overlap=0)
    by_page = {c.pages_text for c in chunks}
    assert by_page == {"1", "2", "3"}
    marked = [c for c in chunks if "page-marker-3" in c.content]
    assert marked and all(c.pages == (3,) for c in marked)
    assert not any("<!-- page" in c.content for c in chunks)
    assert next(c for c in chunks if "ERR_SIGN" in c.content).heading_path == ("第1章 支付超时 Chapter 1",)


def test_a_docx_keeps_title_headings_lists_and_tables():
    converted = convert(files.docx_bytes(), fmt="docx", limits=LIMITS)

    assert converted.title == "部署手册" and converted.keywords == ["部署", "deploy"]
    lines = converted.markdown.splitlines()
    assert [line for line in lines if line.startswith("#")] == [
        "# 部署手册",
        "## 准备工作",
        "### 回滚步骤",
        "## 监控",
    ]
    assert "- 备份数据库\n- 通知值班同事" in converted.markdown
    assert "| 参数 | 默认值 |\n| --- | --- |\n| timeout | 30s |" in converted.markdown
    paths = {c.heading_path for c in chunk_document(converted.markdown, target=60, overlap=0)}
    assert ("部署手册", "准备工作", "回滚步骤") in paths


def test_html_keeps_structure_drops_scripts_and_navigation_and_reads_title_and_keywords():
    converted = convert(files.html_bytes(), fmt="html", limits=LIMITS)

    assert converted.title == "Redis 缓存集群" and converted.keywords == ["redis", "缓存集群"]
    assert converted.markdown.startswith("# Redis 缓存集群")
    assert "## 故障切换" in converted.markdown and "- 客户端自动重连" in converted.markdown
    assert "| redis-1 | master |" in converted.markdown
    assert "alert" not in converted.markdown and "登录" not in converted.markdown


def test_pptx_slides_are_pages_and_xlsx_sheets_and_csv_are_tables():
    deck = convert(files.pptx_bytes(), fmt="pptx", limits=LIMITS)
    assert deck.page_count == 2 and deck.title == "季度复盘"
    assert "<!-- page 2 -->\n\n## 关键指标\n\n| 指标 | 数值 |" in deck.markdown

    sheets = convert(files.xlsx_bytes(), fmt="xlsx", limits=LIMITS)
    assert "## 错误码\n\n| code | 含义 |\n| --- | --- |\n| E1001 | 库存不足 |" in sheets.markdown
    assert "## 值班表\n\n| 姓名 | 电话 |" in sheets.markdown

    table = convert(files.csv_bytes(), fmt="csv", limits=LIMITS)
    assert table.markdown == "| 城市 | 区号 |\n| --- | --- |\n| 北京 | 010 |\n| 上海 | 021 |"


@pytest.mark.parametrize(
    "make, fmt, reason",
    [
        (files.pdf_bytes, "docx", "is named as a .docx file but its bytes are a PDF"),
        (files.docx_bytes, "pdf", "is named as a PDF but its bytes are a ZIP archive"),
        (files.docx_bytes, "xlsx", "its bytes are a Word document (.docx)"),
        (lambda: b"MZ\x90\x00" + b"\0" * 100, "pdf", "its bytes are a Windows executable"),
        (files.pdf_bytes, "html", "is named as a html text file but its bytes are a PDF"),
        (lambda: files.pdf_bytes(encrypt=True), "pdf", "is an encrypted PDF"),
        (files.docx_xxe_bytes, "docx", "declares a DOCTYPE or XML entities"),
        (files.docx_zip_bomb_bytes, "docx", "a zip bomb?"),
    ],
)
def test_a_file_whose_bytes_lie_or_that_is_hostile_is_refused_before_parsing(make, fmt, reason):
    with pytest.raises(
        ConversionError, match=reason.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")
    ):
        sniff(make(), fmt=fmt, name=f"x.{fmt}", limits=LIMITS)


def test_an_encrypted_pdf_is_refused_by_the_converter_too():
    with pytest.raises(ConversionError, match="encrypted"):
        convert(files.pdf_bytes(encrypt=True), fmt="pdf", limits=LIMITS)


def test_a_scanned_pdf_has_no_text_layer():
    with pytest.raises(ConversionError, match=r"^no text layer \(scanned document\?\)$"):
        convert_isolated(files.scanned_pdf_bytes(), fmt="pdf", limits=LIMITS, timeout=60, memory_mb=1024)


def test_a_pdf_of_10000_pages_is_refused_without_reading_its_pages():
    with pytest.raises(ConversionError, match="has 10,000 pages; the limit is 2,000"):
        convert_isolated(
            files.many_pages_pdf_bytes(10_000), fmt="pdf", limits=LIMITS, timeout=60, memory_mb=1024
        )


@pytest.mark.slow
def test_a_decompression_bomb_hits_the_memory_ceiling_in_the_child_only():
    with pytest.raises(ConversionError, match="INGEST_CONVERT_MEMORY_MB"):
        convert_isolated(
            files.pdf_decompression_bomb_bytes(), fmt="pdf", limits=LIMITS, timeout=120, memory_mb=256
        )


def test_a_conversion_over_the_time_limit_is_stopped():
    with pytest.raises(ConversionError, match=r"took longer than 0\.01 s"):
        convert_isolated(files.pdf_bytes(pages=1), fmt="pdf", limits=LIMITS, timeout=0.01, memory_mb=1024)


def test_text_past_the_character_limit_is_refused():
    with pytest.raises(ConversionError, match="INGEST_MAX_CONVERTED_CHARS"):
        convert(files.pdf_bytes(pages=2), fmt="pdf", limits=Limits(max_chars=200))
