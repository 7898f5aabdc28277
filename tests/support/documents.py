"""Real files of every converted format, made by the tests themselves (nothing shipped).

PDFs come from fpdf2 with a CJK TrueType font (fonts-wqy-microhei; CI installs it), Office
files from python-docx / python-pptx / openpyxl, hostile files from hand-written bytes.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path

CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")

TABLE_ROWS = [
    ("错误码", "含义", "处理"),
    ("ERR_PAY_TIMEOUT", "支付超时", "重试"),
    ("ERR_SIGN", "签名错误", "检查密钥"),
]


def pdf_bytes(
    *,
    pages: int = 3,
    title: str = "支付失败排查手册",
    keywords: str = "支付失败, ERR_PAY_TIMEOUT",
    table: bool = True,
    words: str = "当用户支付超时，请检查回调签名与网关状态。Refund callbacks are retried.",
    encrypt: bool = False,
) -> bytes:
    """A PDF with a heading per page, body text, and a table on page 1."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    pdf.set_keywords(keywords)
    pdf.add_font("wqy", "", str(CJK_FONT))
    pdf.add_font("wqy", "B", str(CJK_FONT))
    for page in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("wqy", size=20)
        pdf.cell(text=f"第{page}章 支付超时 Chapter {page}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("wqy", size=11)
        pdf.multi_cell(0, 6, text=(words + f" page-marker-{page}. ") * 4)
        if table and page == 1:
            pdf.ln(4)
            with pdf.table() as rendered:
                for row in TABLE_ROWS:
                    cells = rendered.row()
                    for value in row:
                        cells.cell(value)
    if encrypt:
        pdf.set_encryption(owner_password="owner", user_password="secret")
    return bytes(pdf.output())


def scanned_pdf_bytes() -> bytes:
    """A page that is only a picture (a filled rectangle): no text layer."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(10, 10, 150, 200, style="F")
    return bytes(pdf.output())


def _raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF from numbered object bodies (1-based), with a correct cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def many_pages_pdf_bytes(pages: int = 10_000) -> bytes:
    """``pages`` empty pages (about 60 bytes each)."""
    kids = b" ".join(b"%d 0 R" % (3 + i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"] * pages
    return _raw_pdf(objects)


def pdf_decompression_bomb_bytes(megabytes: int = 400) -> bytes:
    """One page whose content stream inflates from well under a megabyte to ``megabytes`` MB."""
    compressor = zlib.compressobj(1)
    block = b"0 0 m " * (1024 * 1024 // 6)
    parts = [compressor.compress(block) for _ in range(megabytes)]
    parts.append(compressor.flush())
    stream = b"".join(parts)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    return _raw_pdf(objects)


def docx_bytes(*, title: str = "部署手册", keywords: str = "部署, deploy") -> bytes:
    """Title, headings at two levels, a bulleted list and a table."""
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.keywords = keywords
    document.add_heading(title, 0)
    document.add_heading("准备工作", 1)
    document.add_paragraph("先检查环境变量 DEPLOY_ENV 是否设置。")
    document.add_paragraph("备份数据库", style="List Bullet")
    document.add_paragraph("通知值班同事", style="List Bullet")
    document.add_heading("回滚步骤", 2)
    document.add_paragraph("回滚时执行 rollback-release 命令。")
    table = document.add_table(rows=3, cols=2)
    for i, row in enumerate([("参数", "默认值"), ("timeout", "30s"), ("retries", "3")]):
        for j, value in enumerate(row):
            table.cell(i, j).text = value
    document.add_heading("监控", 1)
    document.add_paragraph("关注 503 错误率与延迟。")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _rezip(data: bytes, replace: dict[str, bytes], *, compression=zipfile.ZIP_DEFLATED) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as target:
        for info in source.infolist():
            target.writestr(info.filename, replace.get(info.filename, source.read(info.filename)))
        for name, content in replace.items():
            if name not in source.namelist():
                target.writestr(name, content)
    return out.getvalue()


def docx_xxe_bytes() -> bytes:
    """A DOCX whose document part declares an external entity pointing at a local file."""
    body = (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        b'<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        b"<w:body><w:p><w:r><w:t>&xxe;</w:t></w:r></w:p></w:body></w:document>"
    )
    return _rezip(docx_bytes(), {"word/document.xml": body})


def docx_zip_bomb_bytes(megabytes: int = 200) -> bytes:
    """A DOCX with a part that inflates ``megabytes`` MB from a few hundred KB."""
    out = io.BytesIO()
    source = zipfile.ZipFile(io.BytesIO(docx_bytes()))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            target.writestr(info.filename, source.read(info.filename))
        with target.open("word/media/padding.bin", "w", force_zip64=True) as member:
            block = b"\0" * (1024 * 1024)
            for _ in range(megabytes):
                member.write(block)
    return out.getvalue()


def html_bytes() -> bytes:
    return """<!doctype html><html><head><meta charset="utf-8"><title>Redis 缓存集群</title>
<meta name="keywords" content="redis, 缓存集群"></head><body><nav>首页 | 文档 | 登录</nav>
<h1>Redis 缓存集群</h1><p>集群有 <b>6</b> 个节点，采用哨兵模式。</p>
<h2>故障切换</h2><ul><li>主节点宕机后哨兵选举新主</li><li>客户端自动重连</li></ul>
<table><tr><th>节点</th><th>角色</th></tr><tr><td>redis-1</td><td>master</td></tr>
<tr><td>redis-2</td><td>replica</td></tr></table><script>alert("x")</script></body></html>""".encode()


def pptx_bytes() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    deck.core_properties.title = "季度复盘"
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "季度复盘"
    first.placeholders[1].text = "收入增长 12%\n成本下降"
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "关键指标"
    table = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for (r, c), value in {(0, 0): "指标", (0, 1): "数值", (1, 0): "活跃用户", (1, 1): "3200"}.items():
        table.cell(r, c).text = value
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_bytes() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "错误码"
    for row in (("code", "含义"), ("E1001", "库存不足"), ("E1002", "地址无效")):
        sheet.append(row)
    contacts = workbook.create_sheet("值班表")
    for row in (("姓名", "电话"), ("张三", "13800000000")):
        contacts.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def csv_bytes() -> bytes:
    return "城市,区号\n北京,010\n上海,021\n".encode()
