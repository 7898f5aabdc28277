"""Dify's ``metadata_condition`` language, evaluated on agentkb documents.

Dify (``core/rag/entities/metadata_entities.py``) sends ``{"logical_operator": "and" | "or",
"conditions": [{"name", "comparison_operator", "value"}, ...] | null}`` and treats any answer but
200 as "no records", so this module refuses only what is malformed and otherwise follows Dify's
own filtering of its internal knowledge bases (``DatasetRetrieval.process_metadata_filter_func``):

- operators: for strings and lists ``is``, ``is not``, ``contains``, ``not contains``,
  ``start with``, ``end with``, ``in``, ``not in``, ``empty``, ``not empty``; for numbers ``=``,
  ``≠``, ``>``, ``<``, ``≥``, ``≤``; for times ``before``, ``after``. Numbers and times compare as
  numbers: a time is a Unix timestamp (what Dify sends for its time metadata) or an ISO 8601
  date / date-time (a date alone is midnight UTC). As in Dify, ``is``/``is not`` with a number
  compare numerically and ``=``/``≠`` with a text value compare as text.
- a condition whose value is missing (null, a blank string, an empty list) is ignored, as Dify
  ignores it itself, whatever the operator but ``empty``/``not empty``;
- fields: Dify's built-in ones mapped to agentkb's (``BUILT_IN_FIELDS``), agentkb's own
  (``domain``, ``title``, ``keywords``, ``doc_key``), and any other name looked up in the
  document's front matter (``metadata["extra"]``), then in its metadata. A field a document does
  not have fails every condition but ``empty`` (SQL's NULL, as in Dify): a field nobody has
  matches nothing instead of failing the request.
- a list field (``keywords``, ``document_name``) satisfies a condition when any of its values does;
  the negated operators (``is not``, ``not contains``, ``not in``, ``≠``) hold when none does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import PurePosixPath
from typing import Any

from django.core.exceptions import ValidationError

from retrieval.agents.texts import echoed

STRING_OPERATORS = ("is", "is not", "contains", "not contains", "start with", "end with")
LIST_OPERATORS = ("in", "not in")
VALUELESS_OPERATORS = ("empty", "not empty")
NUMBER_OPERATORS = ("=", "≠", ">", "<", "≥", "≤")
TIME_OPERATORS = ("before", "after")
OPERATORS = STRING_OPERATORS + LIST_OPERATORS + VALUELESS_OPERATORS + NUMBER_OPERATORS + TIME_OPERATORS
_NEGATED = {"is not": "is", "not contains": "contains", "not in": "in", "≠": "="}

#: Where documents come from in Dify's terms (``MetadataDataSource``): agentkb's are all files.
SOURCE_FILE_UPLOAD = "file_upload"


def _keywords(document: dict[str, Any]) -> list[str]:
    return keywords_of(document.get("metadata"))


def _document_name(document: dict[str, Any]) -> list[str]:
    # What Dify shows as an external record's document name is its title; Dify's own documents
    # are named by their file: either one matches.
    names = [document.get("title") or "", PurePosixPath(document.get("doc_key") or "").name]
    return [n for n in dict.fromkeys(names) if n]


#: Field name -> value of a document row (``id, doc_key, title, domain, metadata, created_at,
#: updated_at``). Dify's built-in fields first (``BuiltInField``), then agentkb's own.
BUILT_IN_FIELDS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "document_name": _document_name,
    "upload_date": lambda d: d.get("created_at"),
    "last_update_date": lambda d: d.get("updated_at"),
    "source": lambda d: SOURCE_FILE_UPLOAD,
    "domain": lambda d: d.get("domain"),
    "title": lambda d: d.get("title"),
    "keywords": _keywords,
    "doc_key": lambda d: d.get("doc_key"),
}
_ABSENT = object()


class ConditionError(ValidationError):
    """A metadata_condition Dify's contract does not allow; the message names the field."""


def _fail(field: str, message: str) -> ConditionError:
    return ConditionError({field: [message]})


def keywords_of(metadata: Any) -> list[str]:
    raw = (metadata if isinstance(metadata, dict) else {}).get("keywords") or []
    if isinstance(raw, str):
        raw = raw.split(",")
    return [str(k).strip() for k in raw if str(k).strip()]


def field_value(document: dict[str, Any], name: str) -> Any:
    """The value of ``name`` for ``document``, or ``_ABSENT``."""
    if name in BUILT_IN_FIELDS:
        value = BUILT_IN_FIELDS[name](document)
        return _ABSENT if value is None else value
    raw = document.get("metadata")
    metadata: dict[str, Any] = raw if isinstance(raw, dict) else {}
    raw_extra = metadata.get("extra")
    extra: dict[str, Any] = raw_extra if isinstance(raw_extra, dict) else {}
    for source in (extra, metadata):
        if name in source and source[name] is not None:
            return source[name]
    return _ABSENT


def as_number(value: Any) -> float | None:
    """A number, or a time as a Unix timestamp; None when ``value`` is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return number if math.isfinite(number) else None
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return as_number(parsed)
    return None


def _text(value: Any) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class Condition:
    names: tuple[str, ...]
    operator: str
    value: Any

    def holds(self, document: dict[str, Any]) -> bool:
        # A condition naming several fields holds when it holds for any of them.
        return any(self._holds_for(field_value(document, name)) for name in self.names)

    def _holds_for(self, field: Any) -> bool:
        if self.operator == "empty":
            return field is _ABSENT or field in ("", [])
        if self.operator == "not empty":
            return field is not _ABSENT and field not in ("", [])
        if field is _ABSENT:
            return False
        values = field if isinstance(field, list) else [field]
        if self.operator in _NEGATED:
            return bool(values) and not any(self._match(v, _NEGATED[self.operator]) for v in values)
        return any(self._match(v, self.operator) for v in values)

    def _match(self, field: Any, operator: str) -> bool:
        if isinstance(self.value, str) and operator in ("=", "is"):
            return _text(field) == self.value
        if operator in NUMBER_OPERATORS + TIME_OPERATORS or (
            operator == "is" and isinstance(self.value, float)
        ):
            number = as_number(field)
            if number is None:
                return False
            return {
                "=": number == self.value,
                "is": number == self.value,
                ">": number > self.value,
                "after": number > self.value,
                "<": number < self.value,
                "before": number < self.value,
                "≥": number >= self.value,
                "≤": number <= self.value,
            }[operator]
        text = _text(field)
        if operator == "is":
            return text == self.value
        if operator == "in":
            return text in self.value
        folded, wanted = text.casefold(), self.value.casefold()
        if operator == "contains":
            return wanted in folded
        if operator == "start with":
            return folded.startswith(wanted)
        if operator == "end with":
            return folded.endswith(wanted)
        raise AssertionError(operator)


@dataclass(frozen=True)
class MetadataCondition:
    logical_operator: str = "and"
    conditions: tuple[Condition, ...] = ()

    def passes(self, document: dict[str, Any]) -> bool:
        if not self.conditions:
            return True
        results = (c.holds(document) for c in self.conditions)
        return any(results) if self.logical_operator == "or" else all(results)

    def as_dict(self) -> dict[str, Any]:
        """As recorded in retrieval_details (the conditions in force, ignored ones left out)."""
        return {
            "logical_operator": self.logical_operator,
            "conditions": [
                {
                    "name": list(c.names),
                    "comparison_operator": c.operator,
                    "value": list(c.value) if isinstance(c.value, tuple) else c.value,
                }
                for c in self.conditions
            ],
        }


def _without_value(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value == []


def metadata_condition_clean(raw: Any, *, field: str = "metadata_condition") -> MetadataCondition:
    """Dify's metadata_condition (absent or null: no filter); raise ConditionError naming the
    first field at fault."""
    if raw is None:
        return MetadataCondition()
    if not isinstance(raw, dict):
        raise _fail(field, "must be an object")
    logical = raw.get("logical_operator") or "and"
    if logical not in ("and", "or"):
        raise _fail(f"{field}.logical_operator", "must be 'and' or 'or'")
    items = raw.get("conditions")
    if items is None:  # Dify's model_dump() of a condition without conditions
        items = []
    if not isinstance(items, list):
        raise _fail(f"{field}.conditions", "must be a list")
    conditions = []
    for i, item in enumerate(items):
        condition = _condition_clean(item, where=f"{field}.conditions[{i}]")
        if condition is not None:
            conditions.append(condition)
    return MetadataCondition(logical, tuple(conditions))


def _condition_clean(item: Any, *, where: str) -> Condition | None:
    if not isinstance(item, dict):
        raise _fail(where, "must be an object")
    names = item.get("name")
    # Dify's model has ``name`` as a string; its documentation has shown a list of strings.
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise _fail(f"{where}.name", "a metadata name (or a list of them) is required")
    operator = item.get("comparison_operator")
    if operator not in OPERATORS:
        raise _fail(f"{where}.comparison_operator", f"must be one of: {', '.join(OPERATORS)}")
    value = item.get("value")
    if operator in VALUELESS_OPERATORS:
        return Condition(tuple(names), operator, None)
    if _without_value(value):
        return None  # Dify skips a condition with no value; so does agentkb
    return Condition(tuple(names), operator, _value_clean(operator, value, where=f"{where}.value"))


def _value_clean(operator: str, value: Any, *, where: str) -> Any:
    if operator in NUMBER_OPERATORS + TIME_OPERATORS:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        number = as_number(value)
        if number is None and operator in ("=", "≠") and isinstance(value, str):
            return value  # Dify compares "=" / "≠" with a text value as text
        if number is None:
            kind = "a number" if operator in NUMBER_OPERATORS else "a time (Unix timestamp or ISO 8601 date)"
            raise _fail(where, f"'{operator}' needs {kind}; got {echoed(value)}")
        return number
    if operator in LIST_OPERATORS:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list) or not all(
            isinstance(v, str) or (isinstance(v, int | float) and not isinstance(v, bool)) for v in value
        ):
            raise _fail(where, f"'{operator}' needs a list of strings or numbers")
        return tuple(_text(v) for v in value)
    # is / is not with a number compare numerically (Dify: ``as_float() == value``).
    if operator in ("is", "is not") and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise _fail(where, f"'{operator}' needs a string")
    return value
