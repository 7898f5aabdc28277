"""PPTX to Markdown with python-pptx: one page per slide (``<!-- page N -->``), the slide title as
a ``##`` heading, text frames as paragraphs (indented levels as list items), tables as pipe
tables, speaker notes after the slide's text. The core properties give title and keywords."""

from __future__ import annotations

import io
import re

from knowledge.converters.base import ConversionError, Converted, Limits
from knowledge.converters.markdown import heading, page_marker, pipe_table


def _shape_blocks(shape) -> list[str]:
    blocks: list[str] = []
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
        rendered = pipe_table(rows)
        return [rendered] if rendered else []
    if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):  # a group
        for child in shape.shapes:
            blocks.extend(_shape_blocks(child))
        return blocks
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        lines = []
        for paragraph in shape.text_frame.paragraphs:
            text = " ".join("".join(run.text for run in paragraph.runs).split())
            if text:
                lines.append(("  " * paragraph.level + "- " + text) if paragraph.level else text)
        if lines:
            blocks.append(
                "\n".join(lines)
                if any(line.lstrip().startswith("- ") for line in lines)
                else "\n\n".join(lines)
            )
    return blocks


def pptx_to_markdown(data: bytes, *, limits: Limits) -> Converted:
    from pptx import Presentation

    try:
        presentation = Presentation(io.BytesIO(data))
    except Exception as exc:
        raise ConversionError(f"is not a readable PPTX file: {exc}") from exc
    slides = list(presentation.slides)
    if len(slides) > limits.max_pages:
        raise ConversionError(
            f"has {len(slides):,} slides; the limit is {limits.max_pages:,} (INGEST_MAX_PDF_PAGES)"
        )
    parts: list[str] = []
    for number, slide in enumerate(slides, start=1):
        parts.append(page_marker(number))
        title_shape = slide.shapes.title
        title = (
            " ".join(title_shape.text.split())
            if title_shape is not None and title_shape.has_text_frame
            else ""
        )
        parts.append(heading(2, title or f"Slide {number}"))
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            parts.extend(_shape_blocks(shape))
        if slide.has_notes_slide:
            notes = (
                slide.notes_slide.notes_text_frame.text.strip() if slide.notes_slide.notes_text_frame else ""
            )
            if notes:
                parts.append(notes)
        if sum(len(p) for p in parts) > limits.max_chars:
            raise ConversionError(
                f"holds more than {limits.max_chars:,} characters of text (INGEST_MAX_CONVERTED_CHARS)"
            )
    properties = presentation.core_properties
    keywords = [k.strip() for k in re.split(r"[,;，、；]", properties.keywords or "") if k.strip()]
    return Converted(
        markdown="\n\n".join(p for p in parts if p),
        title=(properties.title or "").strip(),
        keywords=keywords,
        description=(properties.subject or "").strip(),
        page_count=len(slides),
    )
