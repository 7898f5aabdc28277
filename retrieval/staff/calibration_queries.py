"""Thresholds from a user's own labelled questions (``manage.py calibrate_thresholds``).

The labelled questions and what the lookup answered each with (``Observation``) come from
``retrieval.staff.labelled_queries``. An answer is *right* when the lookup's best candidate is the
expected document; a question expecting nothing has no right answer. PRECISE answers (the unique
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

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from django.db import transaction

from retrieval.staff.labelled_queries import Observation

GRID = 100  # cut-offs every 0.01
BAND = 0.05  # width of the evidence table's similarity bands
DEFAULT_TARGET_HIGHLY_RELEVANT = 0.95
DEFAULT_TARGET_REFERENCE = 0.80
DEFAULT_MIN_ANSWERS = 5
EVIDENCE_SOURCE = "calibrate_thresholds"


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
