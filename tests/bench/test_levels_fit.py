"""bench/levels_fit.py: a fit never sees the set it is reported on; the offline answer is the
lookup's selection rule."""

from bench import levels_fit
from retrieval.lookup.level_features import FEATURES
from retrieval.lookup.level_model import LevelModel
from retrieval.staff.level_fit import Asked
from retrieval.staff.level_fit import answer as level_answer


def _asked(prefix, n, right_margin):
    rows = []
    for i in range(n):
        answerable = i % 4 != 0
        good = {"cos_margin": right_margin, "coverage": 1.0}
        bad = {"cos_margin": -right_margin, "coverage": 0.2}
        rows.append(
            Asked(
                f"{prefix}{i}",
                f"{prefix}/doc{i}" if answerable else None,
                [
                    {
                        "doc_key": f"{prefix}/doc{i}" if answerable else f"{prefix}/other{i}",
                        "features": good if answerable else bad,
                    },
                    {"doc_key": f"{prefix}/x{i}", "features": bad},
                ],
            )
        )
    return rows


def _fits_seen(monkeypatch, key):
    """Spy on ``levels_fit.fit``: the list fills with ``key(question)`` of each fit's questions."""
    fits = []
    real_fit = levels_fit.fit

    def spy(asked, **kw):
        fits.append({key(q) for q in asked})
        return real_fit(asked, **kw)

    monkeypatch.setattr(levels_fit, "fit", spy)
    return fits


def test_a_fit_never_sees_the_reported_set(monkeypatch):
    seen = _fits_seen(monkeypatch, lambda q: q.qid[0])
    collected = {"a": _asked("a", 80, 0.3), "b": _asked("b", 80, 0.1)}
    rows, models = levels_fit.cross_rows(collected, [("a", "b"), ("b", "a")])
    assert seen == [{"a"}, {"b"}]
    labels = [label for label, _ in rows]
    assert "a -> b" in labels and "b -> a" in labels
    assert models["a"].fitted["data_set"] == "a"


def test_the_offline_answer_takes_the_first_candidate_in_the_band_or_precise():
    always = LevelModel("t", FEATURES, tuple(0.0 for _ in FEATURES), 5.0, (), ())  # estimate ~0.993
    never = LevelModel("t", FEATURES, tuple(0.0 for _ in FEATURES), -5.0, (), ())
    q = Asked(
        "q",
        "d/1",
        [{"doc_key": "d/0", "features": {}, "precise": True}, {"doc_key": "d/1", "features": {"x": 1}}],
    )
    assert level_answer(never, q) == ("d/0", "PRECISE")
    q = Asked("q", "d/1", [{"doc_key": "d/1", "features": {"x": 1}}])
    assert level_answer(always, q) == ("d/1", "PRECISE")
    assert level_answer(never, q) == (None, None)


def test_a_refit_that_does_worse_unfitted_is_refused():
    from retrieval.staff.level_fit import refit_decide, split_fit_report

    asked = _asked("a", 80, 0.3)
    fit_half, report_half = split_fit_report(asked)
    assert not {q.qid for q in fit_half} & {q.qid for q in report_half}
    good = levels_fit.fit(fit_half, name="t", fit_set="a")
    # a model fitted on labels turned upside down answers the report half worse
    flipped = [
        Asked(q.qid, None if q.expected else q.candidates[0]["doc_key"], q.candidates) for q in fit_half
    ]
    bad = levels_fit.fit(flipped, name="t", fit_set="flipped")
    refused = refit_decide(bad, good, report_half)
    assert not refused.ok and "hit@1" in refused.reason
    assert refit_decide(good, good, report_half).ok
    assert refit_decide(good, None, report_half).ok


def _grouped(prefix, n, right_margin):
    """Questions of n/4 articles, four questions an article."""
    return [
        Asked(q.qid, q.expected, q.candidates, group=f"{prefix}-article{i // 4}")
        for i, q in enumerate(_asked(prefix, n, right_margin))
    ]


def test_the_pooled_fit_never_sees_the_articles_it_reports_on(monkeypatch):
    fits = _fits_seen(monkeypatch, lambda q: q.group)
    reported = []
    real_answer = levels_fit.answer

    def answer_spy(model, q):
        reported.append((len(fits), q.group))
        return real_answer(model, q)

    monkeypatch.setattr(levels_fit, "answer", answer_spy)
    collected = {"a": _grouped("a", 80, 0.3), "b": _grouped("b", 80, 0.1)}
    rows = levels_fit.pooled_rows(collected, seed=3)

    # per fold: the pooled fit, then one fit per set alone (a, b); answers after each fold's fits
    assert len(fits) == 6
    pooled_first, pooled_second = fits[0], fits[3]
    assert {g[0] for g in pooled_first} == {"a", "b"}  # both sets in one fit
    assert not pooled_first & pooled_second  # the folds' articles do not overlap
    for fitted_count, group in reported:
        fold_fits = fits[0:3] if fitted_count <= 3 else fits[3:6]
        assert all(group not in seen for seen in fold_fits), f"{group} was fitted on and reported"
    # every question answered once by the pooled model and once by its set's own model
    assert len(reported) == 2 * 160
    labels = [label for label, _ in rows]
    assert labels == [
        "a+b -> a, other half",
        "a -> a, other half",
        "a+b -> b, other half",
        "b -> b, other half",
    ]
    assert all(f["questions"] == 80 for _, f in rows)


def test_article_halves_keep_an_article_on_one_side():
    asked = _grouped("a", 40, 0.3)
    first, second = levels_fit.article_halves(asked, seed=1)
    assert {q.group for q in first}.isdisjoint({q.group for q in second})
    assert len(first) + len(second) == 40 and len(first) == 20
    assert levels_fit.article_halves(asked, seed=1) == (first, second)


def test_each_draw_is_fitted_alone_and_reported_on_every_draw_of_the_other_set(monkeypatch):
    fits = _fits_seen(monkeypatch, lambda q: q.qid)
    # two draws of each set: the same questions, the second draw's evidence a little weaker
    collected = {
        seed: {"a": _asked(f"a{seed}-", 80, 0.3 - seed / 100), "b": _asked(f"b{seed}-", 80, 0.1)}
        for seed in (1, 2)
    }
    rows = levels_fit.draws_rows(collected, [("a", "b")])

    assert fits == [{q.qid for q in collected[1]["a"]}, {q.qid for q in collected[2]["a"]}]
    labels = [label for label, _ in rows]
    assert labels == [
        "a[1] -> a[1] (fitted)",
        "a[1] -> b[1]",
        "a[1] -> b[2]",
        "a[2] -> a[2] (fitted)",
        "a[2] -> b[1]",
        "a[2] -> b[2]",
        "  a -> b: lowest",
        "  a -> b: highest",
    ]
    figures = dict(rows)
    unfitted = [figures[label] for label in labels if "-> b[" in label]
    for column in ("hit@1", "not_found"):
        assert figures["  a -> b: lowest"][column] == min(f[column] for f in unfitted)
        assert figures["  a -> b: highest"][column] == max(f[column] for f in unfitted)
    assert all(f["questions"] == 80 for f in unfitted)


def test_draws_refuses_a_collected_file_without_draws(tmp_path):
    import argparse
    import json

    import pytest

    single = tmp_path / "ev.json"
    single.write_text(json.dumps({"cmrc": []}), encoding="utf-8")
    args = argparse.Namespace(
        draws="1,2", fit_on=None, report_on=None, from_collected=str(single), save_collected=None, holdout=0.1
    )
    with pytest.raises(SystemExit, match="not a --draws file"):
        levels_fit.draws_main(args)


def test_the_evidence_folder_is_removed_at_exit_unless_kept(monkeypatch):
    import argparse
    import atexit
    import shutil

    registered = []
    monkeypatch.setattr(atexit, "register", lambda fn, *a, **kw: registered.append((fn, a)))
    removed = levels_fit.scratch_folder(argparse.Namespace(keep=False))
    kept = levels_fit.scratch_folder(argparse.Namespace(keep=True))
    try:
        assert registered == [(shutil.rmtree, (removed,))]
        assert removed.is_dir() and kept.is_dir()
    finally:
        shutil.rmtree(removed, ignore_errors=True)
        shutil.rmtree(kept, ignore_errors=True)
