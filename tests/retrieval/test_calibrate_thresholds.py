"""manage.py calibrate_thresholds: the rule on hand-made answers, the command on a small corpus
(evidence table, suggestion, --apply as a revertable calibration), and bad files refused."""

import json
import re
from io import StringIO

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from knowledge.embeddings import get_embedder
from observability.calibration import calibration_revert
from observability.models import ThresholdCalibration
from retrieval.lookup.thresholds import current_thresholds, thresholds_cache_clear
from retrieval.staff.calibration_queries import evidence_bands, thresholds_suggest
from retrieval.staff.labelled_queries import Observation


@pytest.fixture(autouse=True)
def _thresholds_rule(settings):
    """Threshold suggestions are the seeds' rule's (RETRIEVAL_LEVELS=thresholds); the level
    model's refit is tests/bench/test_levels_fit.py's."""
    settings.RETRIEVAL_LEVELS = "thresholds"


def obs(similarity, right, *, n=1, level=None, expected="doc"):
    answer = expected if right else "other"
    return [Observation("q", expected, answer, similarity, level, True) for _ in range(n)]


# --- the rule ---------------------------------------------------------------------------------------
def test_the_lowest_cut_offs_that_hold_each_levels_precision():
    observations = (
        obs(0.92, True, n=10)
        + obs(0.81, True, n=9)
        + obs(0.78, False)  # HIGHLY_RELEVANT from 0.71 to 0.78: 19 of 20 = 0.95
        + obs(0.70, True, n=4)
        + obs(0.70, False)  # from 0.70 up: 23 of 25 = 0.92, short of 0.95
        + obs(0.66, False)  # REFERENCE from 0.67 to 0.70: 4 of 5 = 0.80; from 0.66: 4 of 6
        + obs(0.60, False, n=2)
        + obs(0.30, False, n=3, expected=None)  # unanswerable questions
        + obs(0.99, True, n=5, level="PRECISE")  # keyword answers: not the thresholds' business
    )
    suggestion = thresholds_suggest(observations, target_highly_relevant=0.95, target_reference=0.80)
    assert suggestion.ok, suggestion.reason
    # Every right answer kept, 2 wrong ones: HIGHLY_RELEVANT anywhere in 0.71-0.78 and REFERENCE in
    # 0.67-0.70 do that; the middle of each is taken.
    assert (suggestion.highly_relevant, suggestion.reference) == (0.74, 0.68)
    assert (suggestion.scored, suggestion.precise, suggestion.right, suggestion.wrong) == (31, 5, 23, 8)
    hr, ref = suggestion.outcome["HIGHLY_RELEVANT"], suggestion.outcome["REFERENCE"]
    assert (hr["answers"], hr["right"], ref["answers"], ref["right"]) == (20, 19, 5, 4)
    assert suggestion.outcome["right_kept"] == 1.0 and suggestion.outcome["wrong_returned"] == 2


def test_no_reference_band_when_nothing_under_highly_relevant_is_precise_enough():
    observations = obs(0.9, True, n=6) + obs(0.5, False, n=3) + obs(0.45, True)
    suggestion = thresholds_suggest(observations, target_highly_relevant=0.95, target_reference=0.8)
    # Above 0.5 only right answers; below, 1 of 4. HIGHLY_RELEVANT in the middle of 0.51-0.90, and
    # REFERENCE between 0.51 and it holds no answer.
    assert (suggestion.highly_relevant, suggestion.reference) == (0.70, 0.60)
    assert suggestion.outcome["REFERENCE"]["answers"] == 0


def test_highly_relevant_needs_enough_answers_else_it_goes_out_of_reach():
    observations = obs(0.9, True, n=3) + obs(0.5, False)
    assert thresholds_suggest(observations, min_answers=3).highly_relevant == 0.70
    suggestion = thresholds_suggest(observations, min_answers=5)
    # Too few answers to trust HIGHLY_RELEVANT: it is put out of reach, REFERENCE still calibrated.
    assert (suggestion.ok, suggestion.highly_relevant, suggestion.reference) == (True, 1.0, 0.70)
    assert "out of reach" in suggestion.reason
    assert suggestion.outcome["REFERENCE"] == {"answers": 3, "right": 3, "precision": 1.0}


def test_the_pair_is_searched_through_the_lookups_level_decision():
    def level(similarity, coverage, highly_relevant, reference):
        """FS-2, then one level down when the answer holds few of the query's key terms."""
        rank = 2 if similarity >= highly_relevant else 1 if similarity >= reference else 0
        if coverage is not None and coverage < 0.4:
            rank = max(rank - 1, 0)
        return (None, "REFERENCE", "HIGHLY_RELEVANT")[rank]

    def answered(similarity, right, coverage, n=1):
        return [
            Observation("q", "doc", "doc" if right else "other", similarity, None, True, coverage)
            for _ in range(n)
        ]

    observations = (
        answered(0.8, True, 0.9, n=10)
        + answered(0.8, False, 0.1)  # as similar as the right ones, but its key terms are absent
        + answered(0.5, True, 0.9, n=4)
        + answered(0.3, False, 0.9, n=2)
    )
    # On similarity alone 0.8 holds 10 of 11: HIGHLY_RELEVANT goes out of reach; REFERENCE in the
    # middle of 0.31-0.50 keeps all 14 right answers and 1 wrong.
    alone = thresholds_suggest(observations, target_highly_relevant=0.95, target_reference=0.8)
    assert (alone.highly_relevant, alone.reference) == (1.0, 0.40)
    # The lookup's decision lowers the lexically absent answer to REFERENCE: HIGHLY_RELEVANT holds
    # 10 of 10 anywhere in 0.51-0.80, REFERENCE 4 of 5 in 0.31-0.50.
    lexical = thresholds_suggest(observations, target_highly_relevant=0.95, target_reference=0.8, level=level)
    assert (lexical.highly_relevant, lexical.reference) == (0.65, 0.40)
    assert lexical.outcome["HIGHLY_RELEVANT"] == {"answers": 10, "right": 10, "precision": 1.0}
    assert lexical.outcome["REFERENCE"] == {"answers": 5, "right": 4, "precision": 0.8}


def test_nothing_to_suggest_without_wrong_answers():
    suggestion = thresholds_suggest(obs(0.7, True, n=10))
    assert suggestion.ok is False and "nothing to separate" in suggestion.reason


def test_evidence_bands_count_answers_and_precision_from_each_band_up():
    observations = (
        obs(0.93, True, n=3) + obs(0.91, False) + obs(0.52, True) + obs(0.1, False, level="PRECISE")
    )
    bands = evidence_bands(observations)
    assert [(b["lo"], b["answers"], b["right"]) for b in bands] == [(0.9, 4, 3), (0.5, 1, 1)]
    assert bands[0]["precision"] == 0.75 and bands[0]["right_kept"] == 0.75
    assert (bands[1]["answers_above"], bands[1]["precision_above"], bands[1]["right_kept"]) == (5, 0.8, 1.0)


# --- the command ----------------------------------------------------------------------------------------
DOCS = {
    "ops/backup.md": ("备份策略", "每天凌晨两点做一次全量备份，备份文件保留三十天。"),
    "ops/certificates.md": ("证书更新", "TLS 证书到期前十四天自动续期，续期失败会发出告警。"),
    "dev/review.md": ("Code review rules", "Every change needs one approving review before it is merged."),
    "dev/release.md": (
        "Release train",
        "We release every Tuesday; a hotfix may ship on any day with two approvals.",
    ),
    "hr/onboarding.md": ("入职指南", "新员工第一天领取电脑和门禁卡，并完成信息安全培训。"),
    "ops/dns.md": (
        "DNS changes",
        "DNS records are changed through the infrastructure repository, never by hand.",
    ),
}
UNRELATED = ["红烧肉怎么做才好吃", "What is the capital of Australia?", "明天北京会下雨吗"]


@pytest.fixture
def labelled(db, corpus, tmp_path):
    for key, (title, text) in DOCS.items():
        corpus.add(key, title=title, domain=key.split("/")[0], chunks=[text])
    path = tmp_path / "questions.jsonl"
    rows = [{"query": text, "expected": key} for key, (_, text) in DOCS.items()]
    rows += [{"query": q, "expected_doc_key": None, "id": f"u{i}"} for i, q in enumerate(UNRELATED)]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def _run(*args):
    out, err = StringIO(), StringIO()
    call_command("calibrate_thresholds", *args, stdout=out, stderr=err)
    return out.getvalue()


def _similarities() -> tuple[float, float]:
    """(lowest similarity of a right answer, highest of an unrelated question's best match),
    computed here with the embedder alone: FS-1 similarity is the cosine of unit vectors."""
    embedder = get_embedder()
    chunks = embedder.encode([text for _, text in DOCS.values()])
    unrelated = embedder.encode(UNRELATED)
    return float(np.min(np.sum(chunks * chunks, axis=1))), float(np.max(unrelated @ chunks.T))


SUGGESTED = re.compile(
    r"suggested: +HIGHLY_RELEVANT >= ([0-9.]+): (\d+) answers, precision ([0-9.]+); REFERENCE >= ([0-9.]+)"
)


def test_suggests_from_the_labelled_questions_and_prints_the_evidence(labelled):
    out = _run("--queries", str(labelled), "--min-answers", "3")
    assert "9 labelled questions" in out
    assert "evidence per similarity band" in out
    assert "9 answers by similarity (6 right, 3 wrong)" in out
    # Six questions are their documents' own text (right); the three unrelated ones are wrong
    # whatever they find: the suggested cut-offs fall between the two.
    highly_relevant, answers, precision, reference = SUGGESTED.search(out).groups()
    lowest_right, highest_wrong = _similarities()
    assert highest_wrong < float(reference) <= float(highly_relevant) <= lowest_right + 1e-6
    assert (int(answers), float(precision)) == (6, 1.0)
    assert "(not applied" in out
    assert ThresholdCalibration.objects.count() == 0


def test_apply_stores_a_calibration_that_wins_and_can_be_reverted(labelled, settings):
    admin = get_user_model().objects.create_superuser("boss", password="x")
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.9  # explicit settings lose to the calibration
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.8
    out = _run("--queries", str(labelled), "--min-answers", "3", "--apply")
    calibration = ThresholdCalibration.objects.get()
    assert f"threshold calibration #{calibration.pk}" in out
    assert calibration.applied_by == admin and not calibration.reverted
    assert calibration.evidence["source"] == "calibrate_thresholds"
    assert calibration.evidence["suggestion"]["questions"] == 9 and calibration.evidence["bands"]
    assert calibration.note.startswith("calibrate_thresholds:")
    highly_relevant, _, _, reference = SUGGESTED.search(out).groups()
    assert calibration.highly_relevant_threshold == float(highly_relevant)
    assert calibration.reference_threshold == float(reference)
    thresholds_cache_clear()
    in_force = current_thresholds()
    assert in_force.source == f"calibration:{calibration.pk}"
    assert (in_force.highly_relevant, in_force.reference) == (float(highly_relevant), float(reference))
    calibration_revert(applied_by=admin)
    thresholds_cache_clear()
    assert (current_thresholds().highly_relevant, current_thresholds().reference) == (0.9, 0.8)


def test_apply_needs_a_staff_user(labelled):
    with pytest.raises(CommandError, match="--user"):
        _run("--queries", str(labelled), "--apply")
    get_user_model().objects.create_user("plain", password="x")
    with pytest.raises(CommandError, match="not a staff user"):
        _run("--queries", str(labelled), "--apply", "--user", "plain")
    assert ThresholdCalibration.objects.count() == 0


def test_apply_without_a_suggestion_changes_nothing(db, corpus, tmp_path):
    get_user_model().objects.create_superuser("boss", password="x")
    key, (title, text) = next(iter(DOCS.items()))
    corpus.add(key, title=title, domain="ops", chunks=[text])
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"query": text, "expected": key}, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match="nothing applied"):
        _run("--queries", str(path), "--apply")
    assert ThresholdCalibration.objects.count() == 0


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"query": "a", "expected": null}', "{not json"], r"line 2: not valid JSON"),
        (['["a", null]'], r"line 1: must be a JSON object"),
        (['{"expected": null}'], r"line 1: query: missing"),
        (['{"query": "  ", "expected": null}'], r"line 1: query: is blank"),
        (['{"query": 3, "expected": null}'], r"line 1: query: must be a string"),
        (['{"query": "a"}'], r"line 1: expected: missing"),
        (['{"query": "a", "expected": 7}'], r"line 1: expected: must be a doc key"),
        (['{"query": "a", "expected_doc_key": ""}'], r"line 1: expected_doc_key: is blank"),
        (
            ['{"query": "a", "expected": "x.md", "expected_doc_key": "y.md"}'],
            r"line 1: expected: and expected",
        ),
        (
            ["", '{"query": "a", "expected": "nowhere/missing.md"}'],
            r"line 2: expected: 'nowhere/missing.md' is not",
        ),
        ([""], r"no questions"),
    ],
)
def test_bad_files_are_refused_naming_the_line_and_field(db, tmp_path, lines, message):
    get_user_model().objects.create_superuser("boss", password="x")
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=message):
        _run("--queries", str(path), "--apply")
    assert ThresholdCalibration.objects.count() == 0


def test_an_expected_document_that_is_not_indexed_is_refused(db, corpus, tmp_path):
    corpus.add("ops/pending.md", title="Pending", domain="ops", chunks=["not yet indexed"], status="PENDING")
    path = tmp_path / "q.jsonl"
    path.write_text('{"query": "pending", "expected": "ops/pending.md"}\n', encoding="utf-8")
    with pytest.raises(CommandError, match=r"line 1: expected: 'ops/pending.md' is PENDING, not INDEXED"):
        _run("--queries", str(path))


def test_a_missing_file_is_named(db, tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        _run("--queries", str(tmp_path / "absent.jsonl"))
