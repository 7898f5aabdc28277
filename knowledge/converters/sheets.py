"""Spreadsheets to Markdown: one ``##`` heading and one pipe table per sheet (XLSX through
openpyxl in read-only mode, values not formulas), CSV through the csv module (UTF-8 or GB18030,
the delimiter sniffed). The first non-empty row is the table's header."""

from __future__ import annotations

import csv
import io

from knowledge.converters.base import ConversionError, Converted, Limits
from knowledge.converters.markdown import heading, pipe_table
from knowledge.converters.text import bytes_to_text


def _too_big(limits: Limits) -> ConversionError:
    return ConversionError(
        f"holds more than {limits.max_chars:,} characters of text (INGEST_MAX_CONVERTED_CHARS)"
    )


def xlsx_to_markdown(data: bytes, *, limits: Limits) -> Converted:
    import openpyxl

    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:
        raise ConversionError(f"is not a readable XLSX file: {exc}") from exc
    try:
        parts: list[str] = []
        size = 0
        for sheet in workbook.worksheets:
            rows: list[list[object]] = []
            for row in sheet.iter_rows(values_only=True):
                cells = ["" if v is None else v for v in row]
                while cells and cells[-1] == "":
                    cells.pop()
                if cells:
                    rows.append(cells)
                    size += sum(len(str(c)) + 3 for c in cells)
                    if size > limits.max_chars:
                        raise _too_big(limits)
            table = pipe_table(rows)
            if table:
                parts.append(heading(2, sheet.title))
                parts.append(table)
        properties = workbook.properties
        title = (properties.title or "").strip()
        keywords = [k.strip() for k in (properties.keywords or "").replace("，", ",").split(",") if k.strip()]
    finally:
        workbook.close()
    return Converted(markdown="\n\n".join(parts), title=title, keywords=keywords)


def csv_to_markdown(data: bytes, *, limits: Limits) -> Converted:
    text, _encoding = bytes_to_text(data)
    if len(text) > limits.max_chars:
        raise _too_big(limits)
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = [row for row in csv.reader(io.StringIO(text), dialect) if any(c.strip() for c in row)]
    except csv.Error as exc:
        raise ConversionError(f"is not valid CSV: {exc}") from exc
    return Converted(markdown=pipe_table(rows))
