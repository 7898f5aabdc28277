"""Files that are not Markdown (PDF, DOCX, PPTX, XLSX, CSV, HTML) turned into Markdown.

Each converter keeps what the heading-aware chunker and L0 use: headings as ``#`` lines, lists
as ``-`` items, tables as pipe tables (one per sheet for spreadsheets), and the document's own
title and keywords where the format has them (PDF/DOCX/PPTX properties, HTML ``<title>`` and
``<meta name="keywords">``). Paged formats (PDF pages, PPTX slides) mark where each page starts
with ``<!-- page N -->`` lines, which the chunker turns into page numbers per chunk.

Two steps, on purpose in two places:

- ``sniff`` (cheap, at upload, in the web process): the bytes are what the name says (magic
  bytes), an OOXML package is not a zip bomb and declares no XML entities, a PDF is not
  encrypted. A refusal here stores nothing.
- ``convert`` (the parsing itself, in the worker): always in a child process with a memory
  ceiling and a time limit (``knowledge.converters.sandbox``), so a hostile file that gets past
  the sniff (a decompression bomb inside a PDF stream, 10,000 pages, a parser bug) costs a child
  process, not the worker. A refusal here leaves the document FAILED with the reason, and no
  chunk or vector is written.

Libraries, chosen by measurement (docs/ingestion.md, "Formats"): pypdfium2 (text layer, with
positions and font sizes for headings and tables), python-docx, python-pptx, openpyxl
(read-only), BeautifulSoup + markdownify for HTML, the csv module for CSV.
"""

from __future__ import annotations

# The shared names live in a leaf module the converters import (no import back into this package
# module, which imports the converters); they are re-exported here for everyone else.
from knowledge.converters.base import CONVERTED_FORMATS, ConversionError, Converted, Limits

__all__ = ("CONVERTED_FORMATS", "ConversionError", "Converted", "Limits", "convert")


def convert(data: bytes, *, fmt: str, limits: Limits) -> Converted:
    """Convert in this process (the sandbox child calls this; nothing else should)."""
    if fmt == "pdf":
        from knowledge.converters.pdf import pdf_to_markdown as converter
    elif fmt == "docx":
        from knowledge.converters.docx import docx_to_markdown as converter
    elif fmt == "pptx":
        from knowledge.converters.pptx import pptx_to_markdown as converter
    elif fmt == "xlsx":
        from knowledge.converters.sheets import xlsx_to_markdown as converter
    elif fmt == "csv":
        from knowledge.converters.sheets import csv_to_markdown as converter
    elif fmt == "html":
        from knowledge.converters.html import html_to_markdown as converter
    else:
        raise ConversionError(f"no converter for format '{fmt}'")
    converted = converter(data, limits=limits)
    converted.markdown = converted.markdown.strip("\n")
    if len(converted.markdown) > limits.max_chars:
        raise ConversionError(
            f"converts to {len(converted.markdown):,} characters of text; the limit is "
            f"{limits.max_chars:,} (INGEST_MAX_CONVERTED_CHARS)"
        )
    if not converted.markdown.strip():
        raise ConversionError("has no text")
    return converted
