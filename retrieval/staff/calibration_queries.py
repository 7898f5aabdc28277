"""Thresholds from a user's own labelled questions (``manage.py calibrate_thresholds``).

A labelled file holds one JSON object a line: ``{"query": "...", "expected": "<doc_key>"}``, or
``"expected": null`` for a question the knowledge base should answer not-found
(``expected_doc_key`` is accepted for ``expected``; other keys such as ``id`` are ignored).

Each question is asked as a dry-run lookup on the current embedding model and corpus (nothing is
recorded, no session is marked). What counts is the lookup's best candidate: the primary it
returned, else the first document it weighed and withheld, with that document's similarity (the
FS-1 similarity the levels are decided on). An answer is *right* when that document is the
expected one; a question expecting nothing has no right answer. PRECISE answers (the unique
keyword match) do not depend on the similarity thresholds and are left out of the evidence.

The rule: every pair of cut-offs on a 0.01 grid (``reference <= highly_relevant``) is tried
through the lookup's own level decision (``retrieval.lookup.normalisation.l1_level_decide``: the
similarity's FS-2 level, moved by lexical evidence where the lookup has it), and the suggestion is
the pair that returns the most right answers while

- HIGHLY_RELEVANT answers are right at least ``target_highly_relevant`` of the time (0.95 by
  default), on at least ``min_answers`` of them; when no pair gets there the model cannot tell a
  HIGHLY_RELEVANT answer on these questions and the level is put out of reach (1.0);
- REFERENCE answers are right at least ``target_reference`` of the time (0.80 by default).

Among pairs returning as many right answers, the one with more of them at HIGHLY_RELEVANT (the
level that tells the agent to stop), then the one returning fewer wrong answers; pairs that still
tie differ only in where the cut-offs fall between the same answers, and the middle one is taken
(as far as the grid allows from the answers on either side).
A suggestion needs wrong answers to learn from (questions expecting nothing, or answered with the
wrong document): with none there is nothing to separate and nothing is suggested.
"""

from __future__ import annotations

import json
import statistics
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.db import transaction

from knowledge.models import ApiDocument
from observability.records import L0_DOC_KEYS, L1_CANDIDATES, WITHHELD_DOC_KEYS

GRID = 100  # cut-offs every 0.01
BAND = 0.05  # width of the evidence table's similarity bands
DEFAULT_TARGET_HIGHLY_RELEVANT = 0.95
DEFAULT_TARGET_REFERENCE = 0.80
DEFAULT_MIN_ANSWERS = 5
EVIDENCE_SOURCE = "calibrate_thresholds"


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
        return self.level == "PRECISE"


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


# --- the evidence and the rule ------------------------------------------------------------------------
def _scored(observations: list[Observation]) -> list[Observation]:
    """The observations the thresholds decide: a similarity, and not a PRECISE keyword answer."""
    return [o for o in observations if o.similarity is not None and not o.precise]


def evidence_bands(observations: list[Observation], width: float = BAND) -> list[dict]:
    """Per similarity band (non-empty ones, highest first): answers, right ones, precision, and
    from the band's lower edge up: answers, precision and the share of all right answers kept."""
    scored = _scored(observations)
    n_bands = round(1 / width)
    total_right = sum(o.right for o in scored)
    rows = []
    above = above_right = 0
    for i in reversed(range(n_bands)):
        lo, hi = round(i * width, 4), round((i + 1) * width, 4)
        inside = [o for o in scored if _band_index(o.similarity, width, n_bands) == i]
        right = sum(o.right for o in inside)
        above += len(inside)
        above_right += right
        if inside:
            rows.append(
                {
                    "lo": lo,
                    "hi": hi,
                    "answers": len(inside),
                    "right": right,
                    "precision": round(right / len(inside), 3),
                    "answers_above": above,
                    "precision_above": round(above_right / above, 3),
                    "right_kept": round(above_right / total_right, 3) if total_right else None,
                }
            )
    return rows


def _band_index(similarity: float, width: float, n_bands: int) -> int:
    return min(max(int(similarity / width + 1e-9), 0), n_bands - 1)


@dataclass
class Suggestion:
    ok: bool
    reason: str
    highly_relevant: float | None = None
    reference: float | None = None
    questions: int = 0
    scored: int = 0
    precise: int = 0
    precise_right: int = 0
    right: int = 0
    wrong: int = 0
    targets: dict = field(default_factory=dict)
    #: the figures the suggested pair gives on these questions
    outcome: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


LevelFunction = Callable[[float, float | None, float, float], str | None]


def lookup_level_function() -> LevelFunction:
    """The level L1 gives a document at a threshold pair, as the lookup decides it
    (``retrieval.lookup.normalisation.l1_level_decide``: the similarity's FS-2 level, moved by lexical
    evidence)."""
    from retrieval.lookup.normalisation import l1_level_decide
    from retrieval.lookup.thresholds import Thresholds

    def level(similarity: float, coverage: float | None, highly_relevant: float, reference: float):
        thresholds = Thresholds(max_l2_distance=2.0, highly_relevant=highly_relevant, reference=reference)
        result = l1_level_decide(similarity=similarity, coverage=coverage, thresholds=thresholds)
        return None if result is None else result.value

    return level


def similarity_level(similarity: float, coverage: float | None, highly_relevant: float, reference: float):
    """FS-2 on the similarity alone (coverage ignored)."""
    if similarity >= highly_relevant - 1e-9:
        return "HIGHLY_RELEVANT"
    if similarity >= reference - 1e-9:
        return "REFERENCE"
    return None


def levels_outcome(
    observations: list[Observation],
    *,
    highly_relevant: float,
    reference: float,
    level: LevelFunction = similarity_level,
) -> dict:
    """What a threshold pair makes of these questions: per level, answers / right / precision,
    the share of right answers it keeps (returned at either level) and the wrong ones it returns."""
    scored = _scored(observations)
    counts = {"HIGHLY_RELEVANT": [0, 0], "REFERENCE": [0, 0]}
    for o in scored:
        given = level(o.similarity, o.coverage, highly_relevant, reference)
        if given in counts:
            counts[given][0] += 1
            counts[given][1] += o.right
    total_right = sum(o.right for o in scored)
    kept = sum(right for _, right in counts.values())
    returned = sum(n for n, _ in counts.values())
    return {
        **{
            name: {"answers": n, "right": right, "precision": _ratio(right, n)}
            for name, (n, right) in counts.items()
        },
        "right_kept": _ratio(kept, total_right),
        "wrong_returned": returned - kept,
    }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def thresholds_suggest(
    observations: list[Observation],
    *,
    target_highly_relevant: float = DEFAULT_TARGET_HIGHLY_RELEVANT,
    target_reference: float = DEFAULT_TARGET_REFERENCE,
    min_answers: int = DEFAULT_MIN_ANSWERS,
    level: LevelFunction = similarity_level,
) -> Suggestion:
    """The suggested pair by the rule in the module docstring, every pair ``reference <=
    highly_relevant`` on the grid tried through ``level`` (the lookup's own level decision)."""
    scored = _scored(observations)
    precise = [o for o in observations if o.precise]
    suggestion = Suggestion(
        ok=False,
        reason="",
        questions=len(observations),
        scored=len(scored),
        precise=len(precise),
        precise_right=sum(o.right for o in precise),
        right=sum(o.right for o in scored),
        wrong=sum(not o.right for o in scored),
        targets={
            "highly_relevant": target_highly_relevant,
            "reference": target_reference,
            "min_answers": min_answers,
        },
    )
    if not suggestion.right:
        suggestion.reason = (
            "no question was answered with its expected document by similarity: nothing to keep"
        )
        return suggestion
    if not suggestion.wrong:
        suggestion.reason = (
            "every answer was right: nothing to separate them from (add questions the knowledge base "
            'cannot answer, with "expected": null)'
        )
        return suggestion
    feasible: dict[tuple[int, int], tuple[tuple, dict]] = {}  # (h step, r step) -> (key, outcome)
    for h_step in range(GRID + 1):
        for r_step in range(h_step + 1):
            outcome = levels_outcome(
                scored, highly_relevant=h_step / GRID, reference=r_step / GRID, level=level
            )
            hr, ref = outcome["HIGHLY_RELEVANT"], outcome["REFERENCE"]
            out_of_reach = h_step == GRID
            if not out_of_reach and (hr["answers"] < min_answers or hr["precision"] < target_highly_relevant):
                continue
            if out_of_reach and hr["answers"] and hr["precision"] < target_highly_relevant:
                continue
            if ref["answers"] and ref["precision"] < target_reference:
                continue
            key = (hr["right"] + ref["right"], 0 if out_of_reach else hr["right"], -outcome["wrong_returned"])
            feasible[(h_step, r_step)] = (key, outcome)
    if not feasible:
        suggestion.reason = (
            f"no threshold pair keeps HIGHLY_RELEVANT right {target_highly_relevant:.0%} and REFERENCE "
            f"{target_reference:.0%} of the time on these questions"
        )
        return suggestion
    best_key = max(key for key, _ in feasible.values())
    tied = [pair for pair, (key, _) in feasible.items() if key == best_key]
    # Equal pairs differ only in where the cut-offs fall between the same answers: take the middle,
    # as far as the grid allows from the answers on either side.
    h_step = statistics.median_low(sorted({h for h, _ in tied}))
    r_step = statistics.median_low(sorted(r for h, r in tied if h == h_step))
    highly_relevant, reference = h_step / GRID, r_step / GRID
    best = (best_key, (highly_relevant, reference), feasible[(h_step, r_step)][1])
    (highly_relevant, reference), outcome = best[1], best[2]
    suggestion.ok = True
    suggestion.highly_relevant = round(highly_relevant, 2)
    suggestion.reference = round(reference, 2)
    suggestion.outcome = outcome
    suggestion.reason = (
        f"the pair that returns the most right answers (then the most at HIGHLY_RELEVANT, then the fewest "
        f"wrong ones) with HIGHLY_RELEVANT >= {target_highly_relevant:.0%} right (on at least {min_answers} "
        f"answers) and REFERENCE >= {target_reference:.0%} right; of equal pairs the middle one"
        + (
            f"; no cut-off gives HIGHLY_RELEVANT {min_answers} answers at that precision, so it is put out "
            "of reach (1.00)"
            if highly_relevant >= 1.0
            else ""
        )
    )
    return suggestion


# --- applying -------------------------------------------------------------------------------------------
@transaction.atomic
def suggestion_apply(
    *, suggestion: Suggestion, observations: list[Observation], applied_by, queries_file: str
):
    """Store the pair as the calibration in force: the same record staff apply from feedback
    (revertable in the admin), marked as coming from this command with its evidence."""
    from observability.calibration import calibration_apply

    if not suggestion.ok:
        raise ValueError(f"nothing to apply: {suggestion.reason}")
    evidence = {
        "source": EVIDENCE_SOURCE,
        "queries_file": queries_file,
        "suggestion": suggestion.as_dict(),
        "bands": evidence_bands(observations),
    }
    return calibration_apply(
        highly_relevant_threshold=suggestion.highly_relevant,
        reference_threshold=suggestion.reference,
        applied_by=applied_by,
        evidence=evidence,
        note=f"{EVIDENCE_SOURCE}: {suggestion.questions} labelled questions from {queries_file}",
    )
