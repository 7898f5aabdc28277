"""Labelled questions asked of the lookup (``manage.py calibrate_thresholds``): the file, and what
the lookup answers each question with.

A labelled file holds one JSON object a line: ``{"query": "...", "expected": "<doc_key>"}``, or
``"expected": null`` for a question the knowledge base should answer not-found
(``expected_doc_key`` is accepted for ``expected``; other keys such as ``id`` are ignored).

Each question is asked as a dry-run lookup on the current embedding model and corpus (nothing is
recorded, no session is marked). What counts is the lookup's best candidate: the primary it
returned, else the first document it weighed and withheld, with that document's similarity (the
FS-1 similarity the levels are decided on). An answer is *right* when that document is the
expected one. What the thresholds are fitted to from these is ``retrieval.staff.calibration_queries``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from knowledge.models import ApiDocument
from observability.records import L0_DOC_KEYS, L1_CANDIDATES, WITHHELD_DOC_KEYS, RelevanceLevel


class LabelledQueriesError(ValueError):
    """A labelled-questions file that cannot be used: names the line and the field at fault."""


@dataclass(frozen=True)
class LabelledQuery:
    line: int
    query: str
    expected: str | None


@dataclass(frozen=True)
class Observation:
    """What the lookup answered one labelled question with."""

    query: str
    expected: str | None
    answer: str | None  # the best candidate's doc key (None: the lookup had no candidate)
    similarity: float | None
    level: str | None  # the level the lookup gave with the thresholds in force
    found: bool
    #: lexical evidence on the answer (the share of the query's key terms it holds), if recorded
    coverage: float | None = None

    @property
    def right(self) -> bool:
        return self.expected is not None and self.answer == self.expected

    @property
    def precise(self) -> bool:
        return self.level == RelevanceLevel.PRECISE


# --- the file ---------------------------------------------------------------------------------------
def _error(path: Path, line: int, field_name: str | None, message: str) -> LabelledQueriesError:
    where = f"{path}: line {line}"
    return LabelledQueriesError(f"{where}: {field_name}: {message}" if field_name else f"{where}: {message}")


def labelled_queries_read(path: Path | str) -> list[LabelledQuery]:
    """Read and check the whole file (every expected doc key must be an INDEXED document) before
    anything is asked. Raises LabelledQueriesError naming the first bad line and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabelledQueriesError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise LabelledQueriesError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    queries: list[LabelledQuery] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _error(path, number, None, f"not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(row, dict):
            raise _error(path, number, None, f"must be a JSON object, got {type(row).__name__}")
        query = row.get("query")
        if "query" not in row:
            raise _error(path, number, "query", "missing")
        if not isinstance(query, str):
            raise _error(path, number, "query", f"must be a string, got {type(query).__name__}")
        if not query.strip():
            raise _error(path, number, "query", "is blank")
        keys = [k for k in ("expected", "expected_doc_key") if k in row]
        if not keys:
            raise _error(
                path, number, "expected", 'missing: give the expected doc key, or null for "not found"'
            )
        if len(keys) == 2 and row["expected"] != row["expected_doc_key"]:
            raise _error(path, number, "expected", "and expected_doc_key disagree; give one of them")
        expected = row[keys[0]]
        if expected is not None and not isinstance(expected, str):
            raise _error(
                path, number, keys[0], f"must be a doc key (string) or null, got {type(expected).__name__}"
            )
        if isinstance(expected, str) and not expected.strip():
            raise _error(path, number, keys[0], 'is blank: use null for "not found"')
        queries.append(LabelledQuery(number, query.strip(), expected.strip() if expected else None))
    if not queries:
        raise LabelledQueriesError(f"{path}: no questions (one JSON object a line)")
    expected_keys = {q.expected for q in queries if q.expected}
    status = dict(ApiDocument.objects.filter(doc_key__in=expected_keys).values_list("doc_key", "status"))
    for q in queries:
        if q.expected and q.expected not in status:
            raise _error(path, q.line, "expected", f"'{q.expected}' is not a document in the knowledge base")
        if q.expected and status[q.expected] != ApiDocument.Status.INDEXED:
            raise _error(
                path,
                q.line,
                "expected",
                f"'{q.expected}' is {status[q.expected]}, not INDEXED: it cannot be found",
            )
    return queries


# --- asking -----------------------------------------------------------------------------------------
def _best_candidate(body: dict, details: dict) -> str | None:
    if body.get("found") and body.get("primary"):
        return body["primary"]["docKey"]
    if details.get(WITHHELD_DOC_KEYS):
        return details[WITHHELD_DOC_KEYS][0]
    for candidate in details.get(L1_CANDIDATES) or []:
        if candidate.get("indexed", True):
            return candidate["doc_key"]
    return (details.get(L0_DOC_KEYS) or [None])[0]


def _similarity_of(details: dict, doc_key: str | None) -> float | None:
    """The best similarity of ``doc_key``'s chunks among the L1 candidates."""
    best = None
    for candidate in details.get(L1_CANDIDATES) or []:
        if candidate.get("doc_key") == doc_key and candidate.get("similarity") is not None:
            best = max(best or 0.0, float(candidate["similarity"]))
    return best


def _coverage_of(details: dict, doc_key: str | None) -> float | None:
    for candidate in details.get(L1_CANDIDATES) or []:
        if candidate.get("doc_key") == doc_key and candidate.get("coverage") is not None:
            return float(candidate["coverage"])
    return None


def queries_observe(
    queries: list[LabelledQuery], *, progress: Callable[[int, int], None] | None = None
) -> list[Observation]:
    """Ask each question as a dry-run lookup (fresh session each) and note its best candidate."""
    from retrieval.services import lookup_knowledge

    observations = []
    for n, q in enumerate(queries, start=1):
        outcome = lookup_knowledge(
            query=q.query, session_id=f"calibrate-{uuid.uuid4().hex}", dry_run=True, source="cli"
        )
        answer = _best_candidate(outcome.body, outcome.details)
        observations.append(
            Observation(
                query=q.query,
                expected=q.expected,
                answer=answer,
                similarity=_similarity_of(outcome.details, answer),
                coverage=_coverage_of(outcome.details, answer),
                level=outcome.body.get("relevanceLevel"),
                found=bool(outcome.body.get("found")),
            )
        )
        if progress:
            progress(n, len(queries))
    return observations
