"""Small Markdown writers the converters share: pipe tables, headings, page markers."""

from __future__ import annotations

import re

from knowledge.chunking import page_marker

__all__ = ["clean_cell", "heading", "page_marker", "pipe_table"]

_WS = re.compile(r"\s+")


def clean_cell(value: object) -> str:
    """One table cell on one line: whitespace folded, pipes escaped."""
    if value is None:
        return ""
    text = _WS.sub(" ", str(value)).strip()
    return text.replace("|", "\\|")


def pipe_table(rows: list[list[object]]) -> str:
    """A GitHub pipe table; the first row is the header. Rows are padded to the widest."""
    rows = [[clean_cell(c) for c in row] for row in rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(["---"] * width) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def heading(level: int, text: str) -> str:
    text = _WS.sub(" ", text).strip()
    return f"{'#' * max(1, min(level, 6))} {text}" if text else ""
