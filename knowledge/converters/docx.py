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

from knowledge.converters import ConversionError, Converted, Limits
from knowledge.converters.markdown import heading, pipe_table

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _heading_level(paragraph, *, has_title: bool) -> int | None:
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
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


def _list_level(paragraph) -> int | None:
    num = paragraph._p.find(f"{_W}pPr/{_W}numPr")
    name = ((paragraph.style.name if paragraph.style is not None else "") or "").lower()
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
    paragraphs = [Paragraph(p, document) for p in body.iterchildren(f"{_W}p")]
    has_title = any((p.style is not None and (p.style.name or "").lower() == "title") for p in paragraphs)

    blocks: list[str] = []
    size = 0
    for element in body.iterchildren():
        if element.tag == f"{_W}p":
            paragraph = Paragraph(element, document)
            text = " ".join(paragraph.text.split())
            if not text:
                continue
            level = _heading_level(paragraph, has_title=has_title)
            if level is not None:
                blocks.append(heading(level, text))
            else:
                depth = _list_level(paragraph)
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
