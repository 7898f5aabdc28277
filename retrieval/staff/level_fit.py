"""Fitting the level model (``retrieval.lookup.level_model``) on labelled questions, and the
figures of a model on a set of them. Used by ``bench/quality.py --fit-on`` and
``manage.py calibrate_thresholds --refit``; scikit-learn is imported only here, never by a lookup.

A labelled question is ``Asked``: its expected doc key (None: nothing answers it) and the
candidates the lookup weighed, in its order, each with its evidence (``retrieval_details
["levels"]["candidates"]``). The figures are those of the lookup's own selection rule
(``retrieval.lookup.ranking.selection_decide``): the first candidate that is PRECISE (a specific
L0 match) or whose estimate reaches REFERENCE's band is the primary, its level the band.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: how many of a question's candidates (in the lookup's order) become fitting rows
ROWS_PER_QUESTION = 3


@dataclass(frozen=True)
class Asked:
    """One question as the lookup saw it: the expected doc key and the ranked candidates."""

    qid: str
    expected: str | None
    candidates: list[dict[str, Any]]  # doc_key, features, precise, via_l0
    #: what the lookup answered (primary, level) when a fitted model was in force
    live: list[Any] | None = None
    #: the article (or other unit) the question was asked of: questions of one article stay on
    #: one side of a fit/report split (``bench/quality.py --pooled``)
    group: str | None = None


def fit_rows(asked: list[Asked], features: tuple[str, ...]) -> tuple[list[list[float]], list[int]]:
    """The fitting rows of ONE set: each question's first candidates, labelled right or wrong."""
    x, y = [], []
    for q in asked:
        for c in q.candidates[:ROWS_PER_QUESTION]:
            if not c.get("features"):
                continue
            x.append([float(c["features"].get(f, 0.0)) for f in features])
            y.append(1 if c["doc_key"] == q.expected else 0)
    return x, y


def fit(asked: list[Asked], *, name: str, fit_set: str):
    """A logistic regression over the evidence, then isotonic calibration of its output on
    out-of-fold predictions (so the calibration does not trust the regression's own fit)."""
    import numpy as np
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_predict

    from retrieval.lookup.level_features import FEATURES
    from retrieval.lookup.level_model import LevelModel

    x, y = fit_rows(asked, FEATURES)
    X, Y = np.asarray(x), np.asarray(y)
    regression = LogisticRegression(C=1.0, max_iter=2000)
    raw = cross_val_predict(regression, X, Y, cv=5, method="predict_proba")[:, 1]
    regression.fit(X, Y)
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, Y)
    return LevelModel(
        name=name,
        features=FEATURES,
        coefficients=tuple(round(float(c), 6) for c in regression.coef_[0]),
        intercept=round(float(regression.intercept_[0]), 6),
        iso_x=tuple(round(float(v), 6) for v in iso.X_thresholds_),
        iso_y=tuple(round(float(v), 6) for v in iso.y_thresholds_),
        fitted={"data_set": fit_set, "date": datetime.now(tz=UTC).date().isoformat(), "rows": len(Y)},
    )


def answer(model, q: Asked) -> tuple[str | None, str | None]:
    """What the lookup answers with ``model`` (``ranking.selection_decide``): primary, level."""
    from retrieval.lookup.evidence import estimate_capped
    from retrieval.lookup.level_model import FOUND_AT, band

    for c in q.candidates:
        if c.get("precise"):
            return c["doc_key"], "PRECISE"
        if not c.get("features"):  # the model does not apply (evidence.model_applies): the seeds' rule
            if c.get("l1_level") or c.get("via_l0"):
                return c["doc_key"], c.get("l1_level") or "REFERENCE"
            continue
        estimate = estimate_capped(model.estimate(c["features"]), c["features"])
        if estimate >= FOUND_AT:
            level = band(estimate)
            return c["doc_key"], level.value if level else None
    return None, None


def live_figures(asked: list[Asked]) -> dict[str, Any]:
    """The figures of what the lookup itself answered (``--verify``)."""

    class Replay:
        pass

    answers = {q.qid: q.live for q in asked}
    return figures(Replay(), asked, answers=answers)


def figures(model, asked: list[Asked], answers: dict[str, Any] | None = None) -> dict[str, Any]:
    answerable = [q for q in asked if q.expected]
    unanswerable = [q for q in asked if not q.expected]
    right, not_found = 0, 0
    by_level: dict[str, list[int]] = {}
    for q in asked:
        primary, level = answers[q.qid] if answers is not None else answer(model, q)
        ok = primary is not None and primary == q.expected
        if q.expected and ok:
            right += 1
        if not q.expected and primary is None:
            not_found += 1
        if level:
            by_level.setdefault(level, []).append(1 if ok else 0)

    def share(a: int, b: int) -> float | None:
        return round(a / b, 3) if b else None

    return {
        "hit@1": share(right, len(answerable)),
        "not_found": share(not_found, len(unanswerable)),
        **{f"P({lv})": share(sum(v), len(v)) for lv, v in sorted(by_level.items())},
        **{f"n({lv})": len(v) for lv, v in sorted(by_level.items())},
        "questions": len(asked),
    }


def split_fit_report(asked: list[Asked], *, seed: int = 11) -> tuple[list[Asked], list[Asked]]:
    """A seeded half to fit on and the other half to report on: a refit is judged on questions
    it never saw."""
    import random

    order = list(range(len(asked)))
    random.Random(seed).shuffle(order)
    fit_half = set(order[: len(order) // 2])
    return [q for i, q in enumerate(asked) if i in fit_half], [
        q for i, q in enumerate(asked) if i not in fit_half
    ]


@dataclass(frozen=True)
class Refit:
    model: Any
    #: the refit's and the model in force's figures on the report half (never fitted on)
    new: dict[str, Any]
    current: dict[str, Any] | None
    ok: bool
    reason: str


def refit_decide(new_model, current_model, report: list[Asked]) -> Refit:
    """Accept a refit only when its unfitted figures are no worse than the model in force's on
    the same report half: hit@1 and unanswerable not-found both at least as high."""
    new = figures(new_model, report)
    if current_model is None:
        return Refit(new_model, new, None, True, "no level model in force to compare with")
    current = figures(current_model, report)
    worse = [k for k in ("hit@1", "not_found") if (new.get(k) or 0.0) < (current.get(k) or 0.0)]
    if worse:
        return Refit(
            new_model,
            new,
            current,
            False,
            "the refit does worse than the model in force on the questions it was not fitted on: "
            + ", ".join(f"{k} {new.get(k)} < {current.get(k)}" for k in worse),
        )
    return Refit(new_model, new, current, True, "no worse on the questions it was not fitted on")


def labelled_asked(queries: list[Any], progress: Any = None) -> list[Asked]:
    """Ask labelled questions (``labelled_queries.LabelledQuery``) as dry-run lookups and keep
    each one's candidates and evidence. Without a level model in force the evidence is computed
    under a constant one (it does not change the candidates or their order)."""
    import uuid

    from retrieval.lookup.level_features import FEATURES
    from retrieval.lookup.level_model import LevelModel
    from retrieval.lookup.thresholds import current_level_model, level_model_override
    from retrieval.services import lookup_knowledge

    overridden = current_level_model() is None
    if overridden:
        level_model_override(LevelModel("collect", FEATURES, tuple(0.0 for _ in FEATURES), 0.0, (), ()))
    try:
        asked = []
        for n, q in enumerate(queries, start=1):
            outcome = lookup_knowledge(
                query=q.query, session_id=f"refit-{uuid.uuid4().hex}", dry_run=True, source="cli"
            )
            candidates = (outcome.details or {}).get("levels", {}).get("candidates", [])
            asked.append(Asked(f"q{n}", q.expected, candidates))
            if progress:
                progress(n, len(queries))
        return asked
    finally:
        if overridden:
            level_model_override()
