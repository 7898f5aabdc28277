"""Any value an agent sent, made safe to show on a staff page (every app's admin pages use it).

Stored requests are whatever arrived: null, a number, a list, 100,000 characters, lone
surrogates (valid JSON, not encodable as UTF-8: a page containing one cannot be sent at all),
hundreds of combining marks on one letter (drawn as a tower over the rows around it) or emoji.
Pages show them through ``display_text`` (any JSON value as printable text) and ``clipped``
(the first characters, the whole text on hover, in a box that cannot widen its cell).
Files staff download (the invocation CSV export) pass every cell through ``spreadsheet_safe``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

# The hover text carries at most this much: enough to read any real query.
TITLE_CHARS = 2000
# Combining marks kept on one base character (real scripts use at most a few).
MAX_MARKS = 3
_SURROGATE = re.compile("[\ud800-\udfff]")


def _tame(text: str) -> str:
    """Lone surrogates become U+FFFD; runs of combining marks are cut to MAX_MARKS."""
    text = _SURROGATE.sub("\ufffd", text)
    if not any(unicodedata.combining(c) for c in text[: TITLE_CHARS * 4]):
        return text
    kept, run = [], 0
    for char in text:
        run = run + 1 if unicodedata.combining(char) else 0
        if run <= MAX_MARKS:
            kept.append(char)
    return "".join(kept)


def display_text(value: Any) -> str:
    """A stored value as text: strings as they are, None as "", anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return _tame(value)
    return _tame(json.dumps(value, ensure_ascii=False, default=str))


def display_json(value: Any) -> str:
    """A stored JSON value, pretty-printed and safe to put on a page."""
    return _tame(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def display_clean(value: Any) -> Any:
    """``value`` with every string in it made safe (for templates that read a stored dict)."""
    if isinstance(value, str):
        return _tame(value)
    if isinstance(value, dict):
        return {display_clean(k): display_clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [display_clean(v) for v in value]
    return value


def clipped(value: Any, limit: int = 60, *, empty: str = "–") -> SafeString:
    """The first ``limit`` characters, the whole text (up to TITLE_CHARS) on hover."""
    text = display_text(value)
    if not text:
        return format_html('<span class="okb-muted">{}</span>', empty)
    short = text if len(text) <= limit else text[: limit - 1] + "…"
    return format_html('<span class="okb-clip" title="{}">{}</span>', text[:TITLE_CHARS], short)


def request_query(request: Any) -> Any:
    """The ``query`` of a stored request, whatever the request is (None when there is none)."""
    return request.get("query") if isinstance(request, dict) else None


def json_value_text(raw: str | None) -> str:
    """The JSON text of a stored value (``expressions.JSONValueText``) as plain text: a string as
    itself (lone surrogates as U+FFFD: text columns cannot hold them), null or missing as "",
    anything else as compact JSON."""
    if raw is None:
        return ""
    try:
        value = json.loads(raw)
    except ValueError:
        return _SURROGATE.sub("\ufffd", raw)
    if value is None:
        return ""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    return _SURROGATE.sub("\ufffd", json.dumps(value, ensure_ascii=False))


# A cell a spreadsheet would run as a formula (OWASP, CSV injection): = + - @, tab, carriage return.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell that Excel, LibreOffice or Sheets show as text, never run: a string starting
    like a formula (``=HYPERLINK(...)``, ``+1``, ``@SUM(A1)``) gets a leading single quote,
    as OWASP's CSV-injection rule says. Anything else is returned as it is."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value
