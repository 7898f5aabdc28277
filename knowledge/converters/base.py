"""What every converter shares: the formats converted, the limits, the result, the refusal.

A leaf of the package: the converters, the sniff, the sandbox and ``knowledge.parsing`` import
it, and it imports none of them (``knowledge.converters`` re-exports its names).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: suffix -> format name of the formats converted here (Markdown and text are parsed directly).
CONVERTED_FORMATS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".csv": "csv",
    ".html": "html",
    ".htm": "html",
}


class ConversionError(ValueError):
    """The file cannot become Markdown; ``reason`` is what staff read (status FAILED)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    max_pages: int = 2000
    max_chars: int = 5_000_000
    max_unzipped_bytes: int = 50 * 1024 * 1024


@dataclass
class Converted:
    markdown: str
    title: str = ""
    keywords: list[str] = field(default_factory=list)
    description: str = ""
    #: pages (PDF) or slides (PPTX); None for formats without pages
    page_count: int | None = None

    def as_dict(self) -> dict:
        return {
            "markdown": self.markdown,
            "title": self.title,
            "keywords": self.keywords,
            "description": self.description,
            "page_count": self.page_count,
        }
