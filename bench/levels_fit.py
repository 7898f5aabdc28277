"""The level model fitted on one labelled set and reported on another (``bench/quality.py
--fit-on A --report-on B``, and its default run: the cross table).

Each data set is ingested once per run, in a process of its own (Django settings are per process),
and every question asked once through the real lookup (``lookup_knowledge``, dry run) with a level
model whose estimate is a constant: the candidates, their order and each one's evidence
(``retrieval_details["levels"]``) do not depend on the model, so they are collected once and the
model is fitted and reported offline from them. What is reported is what the lookup answers with
the fitted profile: the first candidate in the lookup's order that is PRECISE (a specific L0
match) or whose estimate reaches REFERENCE's band is the primary, its level the band
(``ranking.selection_decide``). ``--verify`` runs the report set again through the lookup with the
fitted model in force and prints both, which must agree.

A fit sees only the fit set's features: the report set's rows are never passed to it
(``fit_rows`` takes one set; ``tests/bench/test_levels_fit.py`` checks it).

``--pooled`` asks another question: what a model fitted on both kinds of set at once does on
articles it never saw. Each set's articles are halved (seeded by ``--seed``); the model fitted on
the first halves of both sets answers the second halves and the reverse, and beside it the same
folds fitted on one set alone. An article's paragraphs and questions stay on one side.

``--draws 11,12,13`` asks how much the figures owe to which questions were held out. Each seed is
a different draw of the held-out paragraphs (a different set of unanswerable questions), each
draw of each set is collected, and the model fitted on every draw of the fit set is reported on
every draw of the report set, with the range of each figure. The shipped profile is one fit of
one draw; a refit on a user's own questions is one draw too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from retrieval.staff.level_fit import Asked, answer, figures, fit, live_figures  # noqa: E402


def collect_main(name: str, args: Any) -> None:
    """Run in the data set's own process: ingest it, ask every question once, keep the evidence
    (and, with ``--with-profile``, what the lookup answered with that model in force)."""
    from bench import quality

    quality.prepare_django(name)
    from retrieval.lookup.level_features import FEATURES
    from retrieval.lookup.level_model import LevelModel, model_from_json
    from retrieval.lookup.thresholds import level_model_override
    from retrieval.services import lookup_knowledge

    dataset = quality.dataset_load(name, args)
    if args.limit and args.limit < len(dataset.questions):
        dataset.questions = dataset.questions[:: max(1, len(dataset.questions) // args.limit)][: args.limit]
    quality._ingest(dataset)
    if args.with_profile:
        level_model_override(model_from_json(json.loads(Path(args.with_profile).read_text(encoding="utf-8"))))
    else:
        # A constant estimate: the evidence is computed and recorded, the order does not use it.
        level_model_override(LevelModel("collect", FEATURES, tuple(0.0 for _ in FEATURES), 0.0, (), ()))
    rows = []
    for question in quality._progress(dataset.questions, f"{name}: collect"):
        outcome = lookup_knowledge(
            query=question.query, session_id=f"fit-{question.qid}", dry_run=True, source="bench"
        )
        body = outcome.body
        primary = body["primary"]["docKey"] if body.get("found") and body.get("primary") else None
        rows.append(
            {
                "qid": question.qid,
                "expected": question.expected,
                "group": question.group or question.qid,
                "candidates": (outcome.details or {}).get("levels", {}).get("candidates", []),
                "live": [primary, body.get("relevanceLevel") if primary else None],
            }
        )
    Path(args.collect_out).write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")


def collect_in_subprocess(name: str, args: Any, out: Path, profile: Path | None = None) -> list[Asked]:
    return collect_all({name: out}, args, profile)[name]


def collect_all(outs: dict[str, Path], args: Any, profile: Path | None = None) -> dict[str, list[Asked]]:
    """Each data set collected in a process of its own, side by side."""
    started = time.perf_counter()
    running = {
        name: subprocess.Popen(_collect_command(name, args, out, profile), cwd=REPO)
        for name, out in outs.items()
    }
    collected = {}
    for name, process in running.items():
        if process.wait() != 0:
            sys.exit(f"collecting {name} failed (exit {process.returncode})")
        rows = json.loads(outs[name].read_text(encoding="utf-8"))
        print(f"  {name}: {len(rows)} questions in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        collected[name] = [Asked(**r) for r in rows]
    return collected


def _collect_command(name: str, args: Any, out: Path, profile: Path | None) -> list[str]:
    command = [
        sys.executable,
        str(REPO / "bench" / "quality.py"),
        "--collect",
        name,
        "--collect-out",
        str(out),
    ]
    for flag in ("cmrc", "drcd", "seed", "holdout", "limit"):
        value = getattr(args, flag, None)
        if value not in (None, "", 0):
            command += [f"--{flag}", str(value)]
    if profile is not None:
        command += ["--with-profile", str(profile)]
    return command


LEVEL_COLUMNS = ("hit@1", "not_found", "P(PRECISE)", "P(HIGHLY_RELEVANT)", "P(REFERENCE)")


def table(rows: list[tuple[str, dict]]) -> str:
    width = max([26] + [len(label) + 2 for label, _ in rows])
    head = f"{'fit -> report':<{width}}" + "".join(f"{c:>20}" for c in LEVEL_COLUMNS)
    lines = [head, "-" * len(head)]
    for label, f in rows:
        cells = []
        for c in LEVEL_COLUMNS:
            v = f.get(c)
            n = f.get(c.replace("P(", "n(")) if c.startswith("P(") else None
            text = "-" if v is None else f"{v:.3f}" + (f" ({n})" if n is not None else "")
            cells.append(f"{text:>20}")
        lines.append(f"{label:<{width}}" + "".join(cells))
    return "\n".join(lines)


def cross_rows(collected: dict[str, list[Asked]], pairs: list[tuple[str, str]]) -> tuple[list, dict]:
    """Each pair's model fitted on its fit set ALONE, its figures on both sets and the gap."""
    rows: list[tuple[str, dict]] = []
    models: dict[str, Any] = {}
    for fit_on, report_on in pairs:
        if fit_on not in models:
            models[fit_on] = fit(collected[fit_on], name="", fit_set=fit_on)
        model = models[fit_on]
        own, other = figures(model, collected[fit_on]), figures(model, collected[report_on])
        rows += [(f"{fit_on} -> {fit_on} (fitted)", own), (f"{fit_on} -> {report_on}", other)]
        gap = {
            k: round(other[k] - own[k], 3)
            for k in LEVEL_COLUMNS
            if other.get(k) is not None and own.get(k) is not None
        }
        rows.append(("  gap (unfitted - fitted)", gap))
    return rows, models


def _collected(names: list[str], args: Any, scratch: Path) -> dict[str, list[Asked]]:
    """Each named set's evidence: from ``--from-collected`` where it has the set, else collected
    now; kept in ``--save-collected`` when asked."""
    saved = json.loads(Path(args.from_collected).read_text(encoding="utf-8")) if args.from_collected else {}
    collected = {n: [Asked(**r) for r in saved[n]] for n in names if n in saved}
    missing = [n for n in names if n not in collected]
    if missing:
        collected.update(collect_all({n: scratch / f"{n}.json" for n in missing}, args))
    if args.save_collected:
        Path(args.save_collected).write_text(
            json.dumps({n: [q.__dict__ for q in v] for n, v in collected.items()}, ensure_ascii=False),
            encoding="utf-8",
        )
    return collected


def article_halves(asked: list[Asked], *, seed: int) -> tuple[list[Asked], list[Asked]]:
    """The questions of a seeded half of the articles, and those of the other half: an article's
    questions (its paragraphs, answerable or held out) never sit on both sides."""
    import random

    groups = sorted({q.group or q.qid for q in asked})
    random.Random(seed).shuffle(groups)
    first = set(groups[: len(groups) // 2])
    return [q for q in asked if (q.group or q.qid) in first], [
        q for q in asked if (q.group or q.qid) not in first
    ]


def pooled_rows(collected: dict[str, list[Asked]], *, seed: int) -> list[tuple[str, dict]]:
    """One model fitted on every set at once, reported on articles it never saw: each set's
    articles are halved (seeded); the model fitted on all sets' first halves answers their second
    halves and the reverse, so each question is answered once, by a fit that did not see its
    article. Beside it, the same folds fitted on the set alone."""
    halves = {name: article_halves(asked, seed=seed) for name, asked in collected.items()}
    pooled: dict[str, dict[str, Any]] = {name: {} for name in collected}
    alone: dict[str, dict[str, Any]] = {name: {} for name in collected}
    label = "+".join(sorted(collected))
    for fold in (0, 1):
        fit_on = {name: halves[name][1 - fold] for name in collected}
        model = fit([q for name in sorted(fit_on) for q in fit_on[name]], name="", fit_set=f"{label} (half)")
        for name in collected:
            own = fit(fit_on[name], name="", fit_set=f"{name} (half)")
            for q in halves[name][fold]:
                pooled[name][q.qid] = answer(model, q)
                alone[name][q.qid] = answer(own, q)
    rows: list[tuple[str, dict]] = []
    for name in sorted(collected):
        rows.append((f"{label} -> {name}, other half", figures(None, collected[name], answers=pooled[name])))
        rows.append((f"{name} -> {name}, other half", figures(None, collected[name], answers=alone[name])))
    return rows


def scratch_folder(args: Any, prefix: str = "agentkb-levels-") -> Path:
    """A temporary folder for the collected evidence, removed when the run ends unless
    ``--keep``."""
    import atexit
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if not getattr(args, "keep", False):
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def pooled_main(args: Any) -> str:
    """``--pooled``: the level model fitted on CMRC 2018 and DRCD together, reported on the
    articles each fold did not see (``pooled_rows``)."""
    scratch = scratch_folder(args)
    collected = _collected(["cmrc", "drcd"], args, scratch)
    missing = [n for n, asked in collected.items() if any(q.group is None for q in asked)]
    if missing:
        sys.exit(
            f"--pooled: the collected evidence of {', '.join(missing)} names no article per question "
            "(collected by an earlier version); collect it again (drop --from-collected)"
        )
    from bench import quality

    quality.prepare_django("fit")
    return (
        f"articles halved with seed {args.seed}; each question answered by the fold that did not see "
        "its article\n" + table(pooled_rows(collected, seed=args.seed))
    )


def draws_rows(
    collected: dict[int, dict[str, list[Asked]]], pairs: list[tuple[str, str]]
) -> list[tuple[str, dict]]:
    """``collected[seed][set]``: each set's evidence under each draw of the held-out paragraphs.
    For each pair, the model fitted on each draw of the fit set ALONE, its figures on that same
    draw (fitted) and on every draw of the report set; then the range of each unfitted figure."""
    rows: list[tuple[str, dict]] = []
    seeds = sorted(collected)
    for fit_on, report_on in pairs:
        unfitted: list[dict] = []
        for fit_seed in seeds:
            model = fit(collected[fit_seed][fit_on], name="", fit_set=f"{fit_on} (draw {fit_seed})")
            rows.append(
                (
                    f"{fit_on}[{fit_seed}] -> {fit_on}[{fit_seed}] (fitted)",
                    figures(model, collected[fit_seed][fit_on]),
                )
            )
            for report_seed in seeds:
                other = figures(model, collected[report_seed][report_on])
                unfitted.append(other)
                rows.append((f"{fit_on}[{fit_seed}] -> {report_on}[{report_seed}]", other))
        rows.append((f"  {fit_on} -> {report_on}: lowest", _extreme(unfitted, min)))
        rows.append((f"  {fit_on} -> {report_on}: highest", _extreme(unfitted, max)))
    return rows


def _extreme(figures_list: list[dict], pick: Any) -> dict:
    """Each figure's lowest or highest value over the rows that have it (counts left out)."""
    out = {}
    for column in LEVEL_COLUMNS:
        values = [f[column] for f in figures_list if f.get(column) is not None]
        if values:
            out[column] = pick(values)
    return out


def draws_main(args: Any) -> str:
    """``--draws``: the cross table over several draws of the held-out paragraphs
    (``draws_rows``). ``--save-collected`` / ``--from-collected`` keep every draw's evidence in
    one file."""
    import copy

    seeds = sorted({int(s) for s in str(args.draws).split(",") if s.strip()})
    pairs = [(args.fit_on, args.report_on)] if args.fit_on else [("cmrc", "drcd"), ("drcd", "cmrc")]
    names = sorted({n for pair in pairs for n in pair})
    saved = json.loads(Path(args.from_collected).read_text(encoding="utf-8")) if args.from_collected else {}
    if saved and "draws" not in saved:
        sys.exit(f"--from-collected {args.from_collected}: not a --draws file (it has no 'draws')")
    collected: dict[int, dict[str, list[Asked]]] = {}
    for seed in seeds:
        kept = saved.get("draws", {}).get(str(seed), {})
        have = {n: [Asked(**r) for r in kept[n]] for n in names if n in kept}
        missing = [n for n in names if n not in have]
        if missing:
            print(f"draw {seed}: collecting {', '.join(missing)}", file=sys.stderr)
            draw_args = copy.copy(args)
            draw_args.seed = seed
            scratch = scratch_folder(args, prefix=f"agentkb-levels-{seed}-")
            have.update(collect_all({n: scratch / f"{n}.json" for n in missing}, draw_args))
        collected[seed] = have
        if args.save_collected:  # after every draw: a long run stopped half-way keeps what it has
            everything = {**saved.get("draws", {})}
            everything.update(
                {str(s): {n: [q.__dict__ for q in v] for n, v in c.items()} for s, c in collected.items()}
            )
            Path(args.save_collected).write_text(
                json.dumps({"draws": everything}, ensure_ascii=False), encoding="utf-8"
            )
    from bench import quality

    quality.prepare_django("fit")
    return (
        f"held-out paragraphs drawn with seeds {', '.join(map(str, seeds))} (holdout {args.holdout}); "
        "[seed] names the draw\n" + table(draws_rows(collected, pairs))
    )


def cross_main(args: Any) -> str:
    """The cross table (default), or one --fit-on/--report-on pair; optionally the profile written
    and the report set verified end-to-end."""
    pairs = [(args.fit_on, args.report_on)] if args.fit_on else [("cmrc", "drcd"), ("drcd", "cmrc")]
    names = sorted({n for pair in pairs for n in pair})
    scratch = scratch_folder(args)
    collected = _collected(names, args, scratch)
    from bench import quality

    quality.prepare_django("fit")
    from retrieval.lookup.level_model import level_model_save
    from retrieval.lookup.profiles import profile_for
    from retrieval.lookup.thresholds import _model_name

    rows, models = cross_rows(collected, pairs)
    out = [table(rows)]
    fit_on, report_on = pairs[0]
    model = models[fit_on]
    if args.verify:
        path = scratch / "profile.json"
        path.write_text(json.dumps(model.as_json()), encoding="utf-8")
        live = collect_in_subprocess(report_on, args, scratch / f"{report_on}-live.json", profile=path)
        out.append(
            "\n"
            + table(
                [
                    (f"{fit_on} -> {report_on} offline", figures(model, collected[report_on])),
                    (f"{fit_on} -> {report_on} live lookup", live_figures(live)),
                ]
            )
        )
    if args.write_profile:
        profile = profile_for(_model_name())
        if profile is None:
            return "\n".join(out) + "\nno embedding profile for this model: nothing written"
        fitted = dict(model.fitted, cross_table={label: f for label, f in rows}, command="bench/quality.py")
        written = level_model_save(type(model)(**{**model.__dict__, "name": profile.name, "fitted": fitted}))
        out.append(f"\nwrote {written.relative_to(REPO)}")
    return "\n".join(out)
