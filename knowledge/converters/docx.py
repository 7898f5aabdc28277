"""DOCX to Markdown with python-docx.

The body is walked in order: paragraphs styled Title / Heading N (or carrying an outline level)
become headings, list paragraphs (a List style or Word numbering) become ``-`` items indented by
their level, tables become pipe tables (first row as header), other paragraphs stay paragraphs.
The core properties give the title, keywords and subject.

mammoth (DOCX to HTML, then markdownify) gave the same structure but took about 20 times as long
on the same files (docs/ingestion.md).
"""

from __future__ import annotations

import io
import re

from knowledge.converters.base import ConversionError, Converted, Limits
from knowledge.converters.markdown import heading, pipe_table

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


class _StyleNames:
    """Style id -> name, read once: python-docx's ``paragraph.style`` searches the styles part on
    every call (87% of the conversion time on a 50-page file)."""

    def __init__(self, document) -> None:
        self.by_id = {style.style_id: style.name or "" for style in document.styles}
        default = document.styles.default(_paragraph_type())
        self.default = (default.name or "") if default is not None else ""

    def of(self, paragraph) -> str:
        style = paragraph._p.find(f"{_W}pPr/{_W}pStyle")
        if style is None:
            return self.default
        return self.by_id.get(style.get(f"{_W}val"), self.default)


def _paragraph_type():
    from docx.enum.style import WD_STYLE_TYPE

    return WD_STYLE_TYPE.PARAGRAPH


def _heading_level(paragraph, *, has_title: bool, styles: _StyleNames) -> int | None:
    name = styles.of(paragraph)
    if name.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(name.strip())
    level = int(match.group(1)) if match else None
    if level is None:
        outline = paragraph._p.find(f"{_W}pPr/{_W}outlineLvl")
        if outline is not None and outline.get(f"{_W}val", "").isdigit():
            value = int(outline.get(f"{_W}val"))
            level = value + 1 if value < 9 else None
    if level is None:
        return None
    return level + 1 if has_title else level


def _list_level(paragraph, *, styles: _StyleNames) -> int | None:
    num = paragraph._p.find(f"{_W}pPr/{_W}numPr")
    name = styles.of(paragraph).lower()
    if num is None and not name.startswith("list"):
        return None
    if num is not None:
        ilvl = num.find(f"{_W}ilvl")
        if ilvl is not None and ilvl.get(f"{_W}val", "").isdigit():
            return int(ilvl.get(f"{_W}val"))
    return 0


def docx_to_markdown(data: bytes, *, limits: Limits) -> Converted:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises several types for a broken package
        raise ConversionError(f"is not a readable DOCX file: {exc}") from exc
    body = document.element.body
    styles = _StyleNames(document)
    paragraphs = [Paragraph(p, document) for p in body.iterchildren(f"{_W}p")]
    has_title = any(styles.of(p).lower() == "title" for p in paragraphs)

    blocks: list[str] = []
    size = 0
    for element in body.iterchildren():
        if element.tag == f"{_W}p":
            paragraph = Paragraph(element, document)
            text = " ".join(paragraph.text.split())
            if not text:
                continue
            level = _heading_level(paragraph, has_title=has_title, styles=styles)
            if level is not None:
                blocks.append(heading(level, text))
            else:
                depth = _list_level(paragraph, styles=styles)
                if depth is not None:
                    item = "  " * depth + "- " + text
                    if blocks and blocks[-1].lstrip().startswith("- "):
                        blocks[-1] += "\n" + item  # one list, not a block per item
                    else:
                        blocks.append(item)
                else:
                    blocks.append(text)
        elif element.tag == f"{_W}tbl":
            table = Table(element, document)
            rows = [[cell.text for cell in row.cells] for row in table.rows]
            rendered = pipe_table(rows)
            if rendered:
                blocks.append(rendered)
        else:
            continue
        size += len(blocks[-1]) if blocks else 0
        if size > limits.max_chars:
            raise ConversionError(
                f"holds more than {limits.max_chars:,} characters of text (INGEST_MAX_CONVERTED_CHARS)"
            )

    properties = document.core_properties
    keywords = [k.strip() for k in re.split(r"[,;，、；]", properties.keywords or "") if k.strip()]
    return Converted(
        markdown="\n\n".join(blocks),
        title=(properties.title or "").strip(),
        keywords=keywords,
        description=(properties.subject or "").strip(),
    )
