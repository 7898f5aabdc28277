"""A lookup's input, cleaned: the query, the session id and top_k, each refused with a message
naming the field (``lookup_input_clean``); and a request's values as they are recorded
(``recorded_value``: strings capped, lone surrogates escaped)."""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

MAX_TOP_K = 100
MAX_SESSION_ID_CHARS = 128
_RECORDED_TEXT = 4000
ONLY_INVISIBLE = "This field may not be blank: it holds only invisible characters."

# Characters that show nothing and are not whitespace to str.strip(): variation selectors, the
# combining grapheme joiner, Hangul fillers, the blank Braille pattern (format characters, such
# as zero-width spaces and joiners, the BOM and bidi marks, are found by their category).
_INVISIBLE = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0),
        *range(0x180B, 0x1810),
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)


def invisible_only(text: str) -> bool:
    """Whether no character of ``text`` shows (a query of zero-width spaces, a BOM, bidi marks,
    control characters...): such a query asks nothing, so it is refused like a blank one rather
    than answered "not found"."""
    return all(
        ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf") or ord(ch) in _INVISIBLE for ch in text
    )


def session_id_clean(session_id: Any) -> str:
    """A session id: a non-blank string of at most 128 characters (the column's size)."""
    if session_id is None:
        raise ValidationError({"session_id": ["This field is required."]})
    if not isinstance(session_id, str):
        raise ValidationError({"session_id": ["Must be a string."]})
    cleaned = session_id.strip()
    if problem := unicode_problem(cleaned):
        raise ValidationError({"session_id": [problem]})
    if not cleaned:
        raise ValidationError({"session_id": ["This field may not be blank."]})
    if len(cleaned) > MAX_SESSION_ID_CHARS:
        raise ValidationError(
            {"session_id": [f"Ensure this field has no more than {MAX_SESSION_ID_CHARS} characters."]}
        )
    return cleaned


def lookup_input_clean(*, query: Any, session_id: Any, top_k: Any) -> tuple[str, str, int]:
    """Validate a lookup's input; raise ValidationError naming every field at fault."""
    errors: dict[str, list[str]] = {}
    cleaned_query = ""
    max_chars = settings.RETRIEVAL_MAX_QUERY_CHARS
    if query is None:
        errors["query"] = ["This field is required."]
    elif not isinstance(query, str):
        errors["query"] = ["Must be a string."]
    else:
        cleaned_query = query.strip()
        if problem := unicode_problem(cleaned_query):
            errors["query"] = [problem]
        elif not cleaned_query:
            errors["query"] = ["This field may not be blank."]
        elif invisible_only(cleaned_query):
            errors["query"] = [ONLY_INVISIBLE]
        elif len(cleaned_query) > max_chars:
            errors["query"] = [
                f"Ensure this field has no more than {max_chars} characters (it has {len(cleaned_query)})."
            ]
    cleaned_session = ""
    try:
        cleaned_session = session_id_clean(session_id)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    cleaned_top_k = settings.RETRIEVAL_TOP_K
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            errors["top_k"] = ["A valid integer is required."]
        elif not 1 <= top_k <= MAX_TOP_K:
            errors["top_k"] = [f"Ensure this value is between 1 and {MAX_TOP_K}."]
        else:
            cleaned_top_k = top_k
    if errors:
        raise ValidationError(errors)
    return cleaned_query, cleaned_session, cleaned_top_k


def recorded_value(value: Any) -> Any:
    """A request value as recorded: strings capped, other JSON scalars kept, anything else shown."""
    if isinstance(value, str):
        # Lone surrogates cannot be stored as UTF-8: recorded escaped, as the agent sent them.
        return value[:_RECORDED_TEXT].encode("utf-8", "backslashreplace").decode("utf-8")
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return repr(value)[:200]


def unicode_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored or embedded, if it cannot (JSON lets lone surrogates through)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"Contains a character that is not valid Unicode text (a lone surrogate at {exc.start})."
    return None
