"""bench/quality.py's figures on hand-made answers (no benchmark runs here), its data-set
preparation on a tiny SQuAD-style file, and the shipped demo labels."""

import json

import pytest

from bench.quality import (
    DEMO_CORPUS,
    Answer,
    Bm25Baseline,
    Document,
    Question,
    cmrc_dataset,
    demo_dataset,
    percentile,
    quality_metrics,
    ranked_from_lookup,
    subset_questions,
)


def answer(expected, primary, level=None, ranked=None, ms=10.0):
    ranked = ranked if ranked is not None else ([primary] if primary else [])
    return Answer("q", "query", expected, primary, level, ranked, ms)


def test_metrics_count_not_found_as_a_miss_and_unanswerable_answers_against_their_level():
    answers = [
        answer("a", "a", "PRECISE", ms=5),  # right, rank 1
        answer("b", "x", "HIGHLY_RELEVANT", ranked=["x", "b"], ms=7),  # wrong primary, right at rank 2
        answer("c", None, None, ranked=["y", "z", "w", "v", "c"], ms=9),  # not found, rank 5 in the ranking
        answer("d", None, None, ranked=[], ms=11),  # not found, not ranked
        answer(None, None, None, ms=13),  # unanswerable, rightly not found
        answer(None, "e", "HIGHLY_RELEVANT", ms=100),  # unanswerable, answered: wrong at HIGHLY_RELEVANT
        answer("f", "f", "HIGHLY_RELEVANT", ms=20),
        answer("g", "g", "REFERENCE", ms=30),
    ]
    m = quality_metrics(answers)
    assert (m["answerable"], m["unanswerable"]) == (6, 2)
    assert m["hit@1"] == round(3 / 6, 4)  # a, f, g
    assert m["recall@5"] == round(5 / 6, 4)  # all but d
    assert m["mrr@5"] == round((1 + 0.5 + 0.2 + 0 + 1 + 1) / 6, 4)
    assert m["found"] == round(4 / 6, 4)  # a, b, f, g answered
    assert m["not_found"] == 0.5
    assert m["levels"]["PRECISE"] == {"answers": 1, "right": 1, "precision": 1.0}
    # b (wrong document), e (nothing to find) and f (right): 1 of 3
    assert m["levels"]["HIGHLY_RELEVANT"] == {"answers": 3, "right": 1, "precision": round(1 / 3, 4)}
    assert m["levels"]["REFERENCE"] == {"answers": 1, "right": 1, "precision": 1.0}
    assert m["answer_precision"] == round(3 / 5, 4)  # answered: a, b, e, f, g; right: a, f, g
    assert m["withheld_first"] == 0.0  # c was ranked fifth, d not at all


def test_withheld_first_counts_right_documents_ranked_first_and_not_returned():
    m = quality_metrics(
        [answer("a", None, ranked=["a", "b"]), answer("b", None, ranked=["x", "b"]), answer("c", "c")]
    )
    assert m["withheld_first"] == round(1 / 3, 4)


def test_answer_precision_is_the_share_of_answers_with_the_right_primary():
    m = quality_metrics([answer("a", "a"), answer("b", "x"), answer(None, "y"), answer("c", None)])
    assert m["answer_precision"] == round(1 / 3, 4)


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 95) == 95.0
    assert percentile([3.0], 95) == 3.0 and percentile([], 50) is None
    m = quality_metrics([answer("a", "a", ms=v) for v in (1.0, 2.0, 3.0, 4.0)])
    assert (m["p50_ms"], m["p95_ms"]) == (2.0, 4.0)


def test_lookup_ranking_puts_what_was_returned_first_then_what_was_weighed():
    body = {"found": True, "primary": {"docKey": "p"}, "supplement": [{"docKey": "s"}]}
    details = {
        "withheld_doc_keys": ["w"],
        "l1_candidates": [
            {"doc_key": "s"},
            {"doc_key": "gone", "indexed": False},
            {"doc_key": "l1"},
            {"doc_key": "p"},
        ],
        "l0_doc_keys": ["k", "l1"],
    }
    assert ranked_from_lookup(body, details) == ["p", "s", "w", "l1", "k"]
    assert ranked_from_lookup({"found": False, "primary": None, "supplement": []}, None) == []


def test_subsets_are_seeded_disjoint_halves():
    questions = [Question(f"q{i}", f"query {i}", "d") for i in range(21)]
    dev = subset_questions(questions, "dev", seed=11)
    test = subset_questions(questions, "test", seed=11)
    assert {q.qid for q in dev} | {q.qid for q in test} == {q.qid for q in questions}
    assert not {q.qid for q in dev} & {q.qid for q in test}
    assert (len(dev), len(test)) == (10, 11)
    assert dev == subset_questions(questions, "dev", seed=11)
    assert subset_questions(questions, "all", seed=11) == questions


def test_cmrc_paragraphs_become_documents_and_held_out_ones_unanswerable(tmp_path):
    data = {
        "data": [
            {
                "title": f"条目{i}",
                "paragraphs": [
                    {
                        "id": f"P{i}",
                        "context": f"第{i}段的内容。",
                        "qas": [{"id": f"P{i}-Q", "question": f"问题{i}"}],
                    }
                ],
            }
            for i in range(10)
        ]
        + [
            {
                "title": "多段条目",
                "paragraphs": [
                    {"id": "M1", "context": "一", "qas": [{"id": "M1-Q", "question": "一?"}]},
                    {"id": "M2", "context": "二", "qas": [{"id": "M2-Q", "question": "二?"}]},
                ],
            }
        ]
    }
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    dataset = cmrc_dataset(path, seed=3, holdout=0.25)
    assert len(dataset.documents) == 9  # 12 paragraphs, 3 held out
    keys = {d.doc_key for d in dataset.documents}
    unanswerable = [q for q in dataset.questions if q.expected is None]
    assert len(unanswerable) == 3 and len(dataset.questions) == 12
    assert all(q.expected in keys for q in dataset.questions if q.expected)
    titles = {d.doc_key: d.title for d in cmrc_dataset(path, seed=3, holdout=0).documents}
    assert (
        titles["cmrc2018/M1.md"] == "多段条目（第 1 段）"
        and titles["cmrc2018/M2.md"] == "多段条目（第 2 段）"
    )
    assert titles["cmrc2018/P0.md"] == "条目0"  # one paragraph: the article's title as it is
    assert b"title:" in dataset.documents[0].data and b"CC BY-SA 4.0" in dataset.documents[0].data
    assert cmrc_dataset(path, seed=3, holdout=0.25).documents == dataset.documents


def test_bm25_always_answers_its_top_document():
    docs = [
        Document("a.md", "退款指南", "退款到账时间取决于支付方式", b""),
        Document("b.md", "连接池", "数据库连接池的大小", b""),
    ]
    baseline = Bm25Baseline(docs)
    got = baseline.ask(Question("q", "退款多久到账", None))
    assert got.primary == "a.md" and got.ranked[0] == "a.md" and got.level is None
    assert baseline.ask(Question("q2", "zzzz", None)).primary is None  # no shared term: nothing ranked


def test_the_demo_labels_name_demo_documents_and_cover_every_kind():
    dataset = demo_dataset()
    keys = {d.doc_key for d in dataset.documents}
    assert len(keys) == len(list(DEMO_CORPUS.rglob("*.md")))
    assert len(dataset.questions) >= 60
    assert all(q.expected in keys for q in dataset.questions if q.expected)
    kinds = {q.kind for q in dataset.questions}
    assert {"paraphrase", "english", "cross-lingual", "error-code", "unrelated"} <= kinds
    assert all((q.expected is None) == (q.kind == "unrelated") for q in dataset.questions)
    assert keys == {q.expected for q in dataset.questions if q.expected}  # every document is asked about
    assert len({q.qid for q in dataset.questions}) == len(dataset.questions)


@pytest.mark.parametrize("holdout", [0.0, 0.5])
def test_holdout_share(tmp_path, holdout):
    data = {
        "data": [
            {
                "title": f"t{i}",
                "paragraphs": [{"id": f"p{i}", "context": "x", "qas": [{"id": f"q{i}", "question": "?"}]}],
            }
            for i in range(8)
        ]
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    assert len(cmrc_dataset(path, seed=1, holdout=holdout).documents) == 8 - round(8 * holdout)


def test_right_by_kind_counts_not_found_as_right_for_questions_expecting_nothing():
    answers = [
        Answer("1", "q", "a", "a", None, ["a"], 1.0, kind="paraphrase"),
        Answer("2", "q", "b", None, None, [], 1.0, kind="paraphrase"),
        Answer("3", "q", None, None, None, [], 1.0, kind="unrelated"),
    ]
    assert quality_metrics(answers)["by_kind"] == {
        "paraphrase": {"questions": 2, "right": 0.5},
        "unrelated": {"questions": 1, "right": 1.0},
    }
