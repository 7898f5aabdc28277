"""Bytes to text: UTF-8 (with or without BOM), then GB18030; anything else is refused.

Shared by the CSV converter and ``knowledge.parsing`` (Markdown and plain text), so it lives
below both: no Django, no parsing (the sandbox child imports it).
"""

from __future__ import annotations

import unicodedata

from knowledge.converters.base import ConversionError


def bytes_to_text(data: bytes) -> tuple[str, str]:
    """(text, encoding name). UTF-8 with BOM, UTF-8, then GB18030; other bytes raise
    ConversionError with the reason."""
    if not data.strip():
        raise ConversionError("is empty")
    if b"\x00" in data:
        # UTF-16/32 text and binary files both hold NUL bytes; neither is UTF-8 or GB18030.
        raise ConversionError("is binary or UTF-16/32 (NUL bytes); save it as UTF-8")
    if data.startswith(b"\xef\xbb\xbf"):
        try:
            return data[3:].decode("utf-8"), "utf-8-sig"
        except UnicodeDecodeError as exc:
            raise ConversionError(f"has a UTF-8 BOM but invalid UTF-8 at byte {exc.start + 3}") from exc
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError as exc:
        raise ConversionError(
            f"is neither UTF-8 nor GB18030 (undecodable byte at offset {exc.start}); save it as UTF-8"
        ) from exc
    # GB18030 maps almost any byte sequence to something; control characters mean it was not text.
    if any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r\f" for ch in text):
        raise ConversionError("is neither UTF-8 nor GB18030 text; save it as UTF-8")
    return text, "gb18030"
