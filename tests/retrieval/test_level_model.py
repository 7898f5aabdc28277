"""The level model: bands of a calibrated estimate, its JSON profile, PRECISE only for a specific
L0 term, entities compared whole, and the selection that reads the estimate."""

import json

import pytest

from observability.records import RelevanceLevel
from retrieval.agents.tracker import SessionRetrievals
from retrieval.lookup.keyword_index import L0Match
from retrieval.lookup.level_features import (
    FEATURES,
    CandidateSignals,
    entity_share,
    features_compute,
    longest_common_share,
    query_entities,
)
from retrieval.lookup.level_model import band, level_model_save, model_from_json
from retrieval.lookup.ranking import Candidate, candidates_collect, selection_decide
from retrieval.lookup.specificity import term_specific
from retrieval.lookup.thresholds import Thresholds

SEEDS = Thresholds(max_l2_distance=2.0, highly_relevant=0.75, reference=0.5)


def _profile(**over):
    data = {
        "format": 1,
        "name": "t",
        "features": list(FEATURES),
        "coefficients": [4.0] + [0.0] * (len(FEATURES) - 1),
        "intercept": 0.0,
        "isotonic": {"x": [0.0, 0.5, 1.0], "y": [0.0, 0.5, 1.0]},
    }
    data.update(over)
    return data


@pytest.mark.parametrize(
    ("estimate", "level"),
    [
        (0.995, RelevanceLevel.PRECISE),
        (0.99, RelevanceLevel.PRECISE),
        (0.9899, RelevanceLevel.HIGHLY_RELEVANT),
        (0.95, RelevanceLevel.HIGHLY_RELEVANT),
        (0.80, RelevanceLevel.REFERENCE),
        (0.7999, None),
        (None, None),
    ],
)
def test_the_levels_are_bands_of_the_estimate(estimate, level):
    assert band(estimate) == level


def test_a_profile_round_trips_and_its_estimate_follows_the_evidence(tmp_path):
    model = model_from_json(_profile())
    again = model_from_json(json.loads(level_model_save(model, tmp_path / "t.json").read_text()))
    assert again == model
    low, high = model.estimate({"cos_margin": -0.5}), model.estimate({"cos_margin": 0.5})
    assert 0 <= low < 0.5 < high <= 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"format": 9}, "format"),
        ({"coefficients": [1.0]}, "coefficients"),
        ({"isotonic": {"x": [1.0, 0.0], "y": [0.0, 1.0]}}, "isotonic"),
    ],
)
def test_a_broken_profile_is_refused_naming_the_field(change, field):
    with pytest.raises(ValueError, match=field):
        model_from_json(_profile(**change))


@pytest.mark.parametrize("term", ["ERR_TIMEOUT", "max_connections", "HikariCP", "灰度发布", "捷运"])
def test_error_codes_identifiers_and_rare_terms_are_specific(term):
    assert term_specific(term)


@pytest.mark.parametrize("term", ["总督", "银河", "政策", "光学", "台北", "北京", "policy"])
def test_common_words_and_city_names_are_not_specific(term):
    assert not term_specific(term)


def test_the_document_key_is_specific():
    assert term_specific("api/errors.md", "api/errors.md")


def _collect(term, doc_key="d/x.md"):
    from retrieval.lookup.evidence import _specific_match

    return candidates_collect(
        l0=[L0Match(doc_key, term, "d", terms=[term])],
        hits=[],
        thresholds=SEEDS,
        l0_match_count=1,
        precise_if=_specific_match,
    )


def test_a_generic_word_title_does_not_give_precise_while_an_error_code_does():
    assert _collect("总督")[0].precise is False
    assert _collect("err_quota_exceeded")[0].precise is True
    # the seeds' rule (thresholds mode) keeps FS-2: any unique L0 match is PRECISE
    seeds = candidates_collect(
        l0=[L0Match("d/x.md", "总督", "d", terms=["总督"])], hits=[], thresholds=SEEDS, l0_match_count=1
    )
    assert seeds[0].precise is True


@pytest.mark.parametrize(
    ("query", "text", "share"),
    [
        ("2号线几点收班", "12号线的收班时间是23点", 0.0),
        ("2号线几点收班", "2号线的收班时间是23点", 1.0),
        ("ERR_AUTH 是什么", "err_auth_failed 表示认证失败", 0.0),
        ("ERR_AUTH 是什么", "err_auth 表示认证失败", 1.0),
    ],
)
def test_numbers_and_codes_count_only_whole(query, text, share):
    assert entity_share(query_entities(query), text.casefold()) == share


def test_a_near_name_entity_counts_as_absent():
    entities = [e for e in query_entities("吴中区有哪些景点") if e.kind == "name"]
    assert entities, "jieba tags the district's name"
    # a sibling district one character apart: its characters occur, the name does not
    assert entity_share(entities, "吴江区与吴县中部有很多景点") == 0.0
    assert entity_share(entities, "吴中区有很多景点") == 1.0


def test_an_identifier_the_text_lacks_keeps_the_answer_below_reference():
    """ "What is the Python GIL?" on a runbook with a Python sample: python is its word alone (a
    BM25 margin of 1), GIL is nowhere. The identifier absent caps the estimate below REFERENCE."""
    from retrieval.lookup.evidence import KEY_TERMS_ABSENT_CAP, estimate_capped

    features = features_compute(
        "What is the Python GIL?",
        [
            CandidateSignals(
                "pay", 0.22, 3.1, 0.46, "Payment callback signature\n```python\nhmac.compare_digest()"
            ),
            CandidateSignals("gil", 0.18, None, 0.5, "Python's GIL (global interpreter lock) explained"),
            CandidateSignals("gilt", 0.18, None, 0.5, "gilt-edged securities in python-free finance"),
        ],
    )
    assert features["pay"]["identifiers_absent"] == 1.0
    assert features["gil"]["identifiers_absent"] == 0.0
    assert features["gilt"]["identifiers_absent"] == 1.0  # "gil" inside "gilt" is not the word
    assert "identifiers_absent" not in FEATURES  # evidence for the cap, not for the model
    assert estimate_capped(0.994, features["pay"]) == KEY_TERMS_ABSENT_CAP
    assert band(estimate_capped(0.994, features["pay"])) is None
    assert estimate_capped(0.994, features["gil"]) == 0.994
    # a fraction is a number (weighed by entity_share), not an identifier: 1/3 is written 三分之一
    (fraction,) = features_compute(
        "约有1/3的人口死亡", [CandidateSignals("d", 0.3, 2.0, 0.8, "约三分之一的人口死亡")]
    ).values()
    assert fraction["identifiers_absent"] == 0.0
    # abbreviations and ids in lower case are not names to insist on: "k8s" for Kubernetes
    (abbreviation,) = features_compute(
        "k8s 集群扩容 3fa9", [CandidateSignals("d", 0.3, 2.0, 0.8, "Kubernetes 集群扩容")]
    ).values()
    assert abbreviation["identifiers_absent"] == 0.0


def test_margins_compare_each_candidate_with_the_best_other():
    features = features_compute(
        "连接池大小",
        [
            CandidateSignals("a", 0.6, 10.0, 1.0, "连接池大小设置"),
            CandidateSignals("b", 0.4, 5.0, 0.5, "线程池"),
        ],
    )
    assert features["a"]["cos_margin"] == pytest.approx(0.2)
    assert features["b"]["cos_margin"] == pytest.approx(-0.2)
    assert features["a"]["bm25_margin"] == pytest.approx(0.5)
    assert features["b"]["bm25_margin"] == pytest.approx(-0.5)
    assert features["a"]["cov_margin"] == pytest.approx(0.5)
    assert features["a"]["lcs"] == pytest.approx(1.0)  # 连接池大小 verbatim
    assert features["b"]["lcs"] == pytest.approx(0.2)  # 池 alone
    assert features["a"]["lcs_margin"] == pytest.approx(0.8)
    assert features["b"]["lcs_margin"] == pytest.approx(-0.8)


@pytest.mark.parametrize(
    ("query", "text", "share"),
    [
        # the question repeats a run of its passage: 6 of its 11 letters
        ("霍布斯出生于英国哪个郡", "霍布斯出生于威尔特郡马姆斯伯里", 6 / 11),
        # a sibling passage holds the words, scattered
        ("霍布斯出生于英国哪个郡", "霍布斯在英国内战期间流亡，他出生的郡不详", 3 / 11),
        # punctuation and spaces are not letters: neither in the query nor in the run
        (
            "connection is not available, request timed out?",
            "error: connection is not available, request timed out after 30000ms",
            1.0,
        ),
        ("", "any text", 0.0),
        ("连接池", "", 0.0),
    ],
)
def test_the_longest_verbatim_run_is_a_share_of_the_query(query, text, share):
    assert longest_common_share(query, text) == pytest.approx(share)


def test_the_verbatim_run_compares_one_script():
    # a Traditional question on a Simplified passage: both folded before they are compared
    features = features_compute(
        "霍布斯出生於英國哪個郡", [CandidateSignals("a", 0.5, 1.0, 1.0, "霍布斯出生于英国威尔特郡")]
    )
    assert features["a"]["lcs"] == pytest.approx(8 / 11)


def test_the_verbatim_run_does_not_grow_with_the_query():
    text = "连接池大小由 maximumPoolSize 设置"
    short = longest_common_share("连接池大小", text)
    assert short == 1.0
    assert longest_common_share("连接池大小" + "，以及别的事情" * 20, text) < short


def _select(*estimates):
    candidates = [
        Candidate(f"d/{i}.md", "d", "t", similarity=0.9, estimate=e) for i, e in enumerate(estimates)
    ]
    return selection_decide(
        candidates=candidates,
        memory=SessionRetrievals(),
        thresholds=SEEDS,
        domain_dedup="off",
        max_supplement=3,
        by_estimate=True,
    )


def test_the_selection_returns_what_reaches_reference_and_names_the_primary_band():
    chosen = _select(0.97, 0.85, 0.5)
    assert [c.doc_key for c in chosen.returned] == ["d/0.md", "d/1.md"]
    assert chosen.level == RelevanceLevel.HIGHLY_RELEVANT
    assert _select(0.7, 0.3).found is False


def test_hit_testing_places_cards_by_their_estimate_under_the_bands_of_the_model():
    from retrieval.staff.hit_test_cards import with_threshold_lines

    cards = [
        {"doc_key": "a", "similarity": 0.26, "estimate": 0.97},
        {"doc_key": "b", "similarity": 0.7, "estimate": 0.3},
    ]
    rows = with_threshold_lines(cards, {"highly_relevant": 0.6, "reference": 0.35}, {"rule": "model:x"})
    order = [r.get("line") or r["candidate"]["doc_key"] for r in rows]
    # a candidate at similarity 0.26 is HIGHLY_RELEVANT by its estimate: above the 0.95 line
    assert order == ["PRECISE", "a", "HIGHLY_RELEVANT", "REFERENCE", "b"]
