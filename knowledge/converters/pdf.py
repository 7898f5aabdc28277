"""PDF (its text layer) to Markdown with pypdfium2.

PDFium gives each run of text on a line as a rectangle; with the run's font size that is enough
to bring back the structure a text dump loses:

- a short line set clearly larger than the body text is a heading (the larger, the higher);
- consecutive lines made of the same number (two or more) of runs with wide gaps between them
  are a table (a ruled or aligned table; the first row is its header);
- lines starting with a bullet are list items; other lines join into paragraphs, a paragraph
  ending where the vertical gap grows.

Each page starts with a ``<!-- page N -->`` marker. No text on any page: the file is a scan
("no text layer (scanned document?)"). Encrypted files and files over ``max_pages`` are refused
before any page is read.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from dataclasses import dataclass

from knowledge.converters.base import ConversionError, Converted, Limits
from knowledge.converters.markdown import heading, page_marker, pipe_table

_BULLET = re.compile(r"^\s*([•●▪◦·‣∙\-*]|\d{1,3}[.)、])\s+")
_CJK_END = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]$")
_CJK_START = re.compile(r"^[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


@dataclass
class _Run:
    top: float
    bottom: float
    left: float
    right: float
    size: float
    text: str


@dataclass
class _Line:
    top: float
    size: float
    runs: list[_Run]

    @property
    def text(self) -> str:
        return " ".join(r.text for r in self.runs)


def _open(data: bytes):
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        message = str(exc)
        if "password" in message.lower():
            raise ConversionError(
                "is an encrypted (password-protected) PDF; upload an unencrypted copy"
            ) from exc
        raise ConversionError(f"is not a readable PDF: {message}") from exc
    if raw.FPDF_GetSecurityHandlerRevision(document.raw) != -1:
        document.close()
        raise ConversionError("is an encrypted PDF; upload an unencrypted copy")
    return document


def _page_runs(page) -> list[_Run]:
    import pypdfium2.raw as raw

    textpage = page.get_textpage()
    try:
        runs = []
        for i in range(raw.FPDFText_CountRects(textpage.raw, 0, -1)):
            left, top, right, bottom = (ctypes.c_double() for _ in range(4))
            raw.FPDFText_GetRect(textpage.raw, i, left, top, right, bottom)
            text = textpage.get_text_bounded(left.value, bottom.value, right.value, top.value)
            text = " ".join(text.split())
            if not text:
                continue
            x = left.value + min(1.0, (right.value - left.value) / 2)
            y = (top.value + bottom.value) / 2
            index = raw.FPDFText_GetCharIndexAtPos(textpage.raw, x, y, 2.0, 2.0)
            size = raw.FPDFText_GetFontSize(textpage.raw, index) if index >= 0 else 0.0
            if size <= 0:
                size = top.value - bottom.value
            runs.append(_Run(top.value, bottom.value, left.value, right.value, round(size, 1), text))
        return runs
    finally:
        textpage.close()


def _lines(runs: list[_Run]) -> list[_Line]:
    """Runs grouped into lines (top to bottom), each line's runs left to right."""
    lines: list[_Line] = []
    for run in sorted(runs, key=lambda r: (-r.top, r.left)):
        tolerance = max(2.0, 0.4 * run.size)
        if lines and abs(lines[-1].top - run.top) <= tolerance:
            lines[-1].runs.append(run)
            lines[-1].size = max(lines[-1].size, run.size)
        else:
            lines.append(_Line(run.top, run.size, [run]))
    for line in lines:
        line.runs.sort(key=lambda r: r.left)
    return lines


def _cells(line: _Line) -> int:
    """How many table cells the line is: runs separated by gaps wider than two characters."""
    if len(line.runs) < 2:
        return 1
    cells = 1
    for previous, run in zip(line.runs, line.runs[1:], strict=False):
        if run.left - previous.right > 2 * line.size:
            cells += 1
    return cells


def _cell_texts(line: _Line) -> list[str]:
    cells: list[list[str]] = [[line.runs[0].text]]
    for previous, run in zip(line.runs, line.runs[1:], strict=False):
        if run.left - previous.right > 2 * line.size:
            cells.append([run.text])
        else:
            cells[-1].append(run.text)
    return [" ".join(c) for c in cells]


def _join(previous: str, text: str) -> str:
    if not previous:
        return text
    if _CJK_END.search(previous) and _CJK_START.search(text):
        return previous + text
    return previous + " " + text


def _page_markdown(lines: list[_Line], *, body_size: float, levels: dict[float, int]) -> list[str]:
    blocks: list[str] = []
    paragraph = ""
    previous_top: float | None = None
    i = 0

    def flush() -> None:
        nonlocal paragraph
        if paragraph:
            blocks.append(paragraph)
            paragraph = ""

    while i < len(lines):
        line = lines[i]
        cells = _cells(line)
        if cells >= 2:
            j = i + 1
            while j < len(lines) and _cells(lines[j]) == cells:
                j += 1
            if j - i >= 2:
                flush()
                blocks.append(pipe_table([_cell_texts(row) for row in lines[i:j]]))
                previous_top = None
                i = j
                continue
        text = line.text
        level = levels.get(line.size)
        if level is not None and len(line.runs) == 1 and len(text) <= 200:
            flush()
            blocks.append(heading(level, text))
            previous_top = None
        elif _BULLET.match(text):
            flush()
            blocks.append("- " + _BULLET.sub("", text, count=1))
            previous_top = line.top
        else:
            gap = (previous_top - line.top) if previous_top is not None else 0.0
            if paragraph and gap > 1.9 * max(line.size, body_size):
                flush()
            if blocks and blocks[-1].startswith("- ") and not paragraph and 0 < gap <= 1.9 * line.size:
                blocks[-1] = _join(blocks[-1], text)  # a list item running onto the next line
            else:
                paragraph = _join(paragraph, text)
            previous_top = line.top
        i += 1
    flush()
    return blocks


def pdf_to_markdown(data: bytes, *, limits: Limits) -> Converted:
    document = _open(data)
    try:
        page_count = len(document)
        if page_count > limits.max_pages:
            raise ConversionError(
                f"has {page_count:,} pages; the limit is {limits.max_pages:,} (INGEST_MAX_PDF_PAGES)"
            )
        metadata = document.get_metadata_dict(skip_empty=True)
        pages: list[list[_Line]] = []
        total = 0
        for number in range(page_count):
            page = document[number]
            try:
                lines = _lines(_page_runs(page))
            finally:
                page.close()
            total += sum(len(line.text) for line in lines)
            if total > limits.max_chars:
                raise ConversionError(
                    f"holds more than {limits.max_chars:,} characters of text (INGEST_MAX_CONVERTED_CHARS)"
                )
            pages.append(lines)
    finally:
        document.close()

    if not any(pages):
        raise ConversionError("no text layer (scanned document?)")
    sizes: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            sizes[line.size] += len(line.text)
    body_size = sizes.most_common(1)[0][0]
    heading_sizes = sorted({s for s in sizes if s >= body_size * 1.2}, reverse=True)[:4]
    levels = {size: level for level, size in enumerate(heading_sizes, start=1)}

    parts: list[str] = []
    for number, lines in enumerate(pages, start=1):
        parts.append(page_marker(number))
        parts.extend(_page_markdown(lines, body_size=body_size, levels=levels))
    keywords = [k.strip() for k in re.split(r"[,;，、；]", metadata.get("Keywords", "")) if k.strip()]
    return Converted(
        markdown="\n\n".join(parts),
        title=metadata.get("Title", "").strip(),
        keywords=keywords,
        description=metadata.get("Subject", "").strip(),
        page_count=page_count,
    )
