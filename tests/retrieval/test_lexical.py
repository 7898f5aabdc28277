"""Lexical evidence, pure (retrieval/lookup/query_terms.py, retrieval/lookup/lexical.py): which words of a query count and how much, the
script a text is written in, when a document in another script is compared at all, quotations,
and the BM25 request's text. No database, no Milvus: jieba's and wordfreq's tables only."""

import dataclasses

import pytest

from retrieval.lookup import lexical
from retrieval.lookup import query_terms as query_terms_module
from retrieval.lookup.lexical import lexical_evidence, main_script
from retrieval.lookup.query_terms import QueryTerms, Term, bm25_query_text, query_terms


def lexical_warm_up() -> None:
    query_terms_module._idf.load()


def term_coverage(terms, text, *, query_script):
    """The weighted share of ``terms`` found in ``text`` when both are written in one script."""
    evidence = lexical_evidence(terms, text, query_script=query_script)
    return evidence.coverage if evidence is not None and evidence.same_script else None


def _terms(query: str) -> dict[str, Term]:
    return {t.text: t for t in query_terms(query)}


# --- which words are terms -----------------------------------------------------------------------
def test_one_ascii_character_is_no_term_two_are_and_one_cjk_character_is():
    terms = _terms("db io x 4 猫")
    assert list(terms) == ["db", "io", "猫"]


def test_question_and_function_words_are_dropped_but_the_words_after_them_are_kept():
    # A stop word, a repeated word and punctuation each skip one token, never the rest.
    assert list(_terms("what is the refund, refund 的 退款 ？ timeout")) == ["refund", "退款", "timeout"]
    assert query_terms("what is the") == ()
    assert query_terms("？！") == ()
    # Punctuation NFKC leaves outside ASCII (CJK brackets, dashes, the ideographic full stop and
    # comma) is cut into tokens of its own: none is a term.
    assert list(_terms("《退款》——说明。、")) == ["退款", "说明"]


def test_a_latin_run_stays_whole_without_its_trailing_punctuation():
    assert list(_terms("timeout. ERR_QUOTA_EXCEEDED/ java.lang.OutOfMemoryError")) == [
        "timeout",
        "err_quota_exceeded",
        "java.lang.outofmemoryerror",
    ]


def test_every_term_is_tagged_with_its_script():
    terms = _terms("退款 refund")
    assert terms["退款"].script == "cjk" and not terms["退款"].identifier
    assert terms["refund"].script == "latin" and not terms["refund"].identifier


@pytest.mark.parametrize(
    ("word", "identifier"),
    [
        ("max_connections", True),  # a separator inside
        ("v1.2", True),
        ("p99-latency", True),
        ("3000ms", True),  # letters and digits
        ("http2", True),
        ("3000", False),  # digits alone: a number, not a name
        ("status", False),  # letters alone: a word
    ],
)
def test_identifiers_are_names_with_a_separator_inside_or_letters_and_digits(word, identifier):
    assert _terms(f"refund {word}")[word].identifier is identifier


def test_camel_case_words_are_identifiers_although_they_are_letters_alone():
    terms = _terms("HikariCP and maxUnavailable, not Status")
    assert terms["hikaricp"].identifier and terms["maxunavailable"].identifier
    assert not terms["status"].identifier


# --- how much a term weighs ------------------------------------------------------------------------
def test_identifiers_and_unknown_latin_words_weigh_the_table_s_largest_idf():
    lexical_warm_up()
    largest = query_terms_module._idf.max
    terms = _terms("zqxjvwq max_connections status")
    assert terms["max_connections"].weight == largest
    assert terms["zqxjvwq"].weight == largest  # English has no frequency for it
    assert 0 < terms["status"].weight < largest


def test_english_words_weigh_minus_the_log_of_their_frequency():
    import math

    from wordfreq import word_frequency

    terms = _terms("status comes")
    assert terms["status"].weight == pytest.approx(-math.log(word_frequency("status", "en")))
    assert terms["comes"].weight == pytest.approx(-math.log(word_frequency("comes", "en")))
    assert terms["status"].weight > terms["comes"].weight > 0


def test_chinese_words_weigh_their_idf_and_unknown_ones_the_median():
    lexical_warm_up()
    terms = _terms("退款 丨")
    assert terms["退款"].weight == query_terms_module._idf.table["退款"]
    assert "丨" not in query_terms_module._idf.table
    assert terms["丨"].weight == query_terms_module._idf.median
    assert query_terms_module._idf.median < query_terms_module._idf.max


def test_the_idf_table_is_read_once_per_process():
    lexical_warm_up()
    table = query_terms_module._idf.table
    lexical_warm_up()
    assert query_terms_module._idf.table is table and len(table) > 100_000


def test_the_terms_are_cut_once_per_query_and_cannot_be_changed_by_a_caller():
    """The lookup asks twice for a query's terms (the BM25 request, then the evidence): the second
    ask is the first's answer. Shared so, a lookup changing a term would change every later one's."""
    assert query_terms("refund timeout") is query_terms("refund timeout")
    term = query_terms("refund timeout")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        term.weight = 0.0


def test_the_query_s_latin_words_are_kept_in_order_with_their_stop_words():
    assert query_terms("Connection is not available, 请求 timed out").latin_words == (
        "connection",
        "is",
        "not",
        "available",
        "timed",
        "out",
    )


def test_the_bm25_request_is_the_query_s_terms_without_question_words():
    assert bm25_query_text("What does ERR_QUOTA_EXCEEDED mean 是什么") == "err_quota_exceeded"
    assert bm25_query_text("信用卡退款怎么处理？") == "信用卡 退款 处理"
    assert bm25_query_text("what is it?") == ""


# --- the script of a text --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("猫abc", "cjk"),  # one CJK character weighs three Latin letters
        ("猫abcd", "latin"),
        ("猫", "cjk"),
        ("abc", "latin"),
        ("1234 !?", None),  # no letter of either
        ("", None),
    ],
)
def test_the_main_script_counts_one_cjk_character_as_three_latin_letters(text, script):
    assert main_script(text) == script


# --- the evidence ---------------------------------------------------------------------------------
def test_without_terms_weight_or_query_script_there_is_no_evidence():
    assert lexical_evidence((), "退款", query_script="cjk") is None
    assert lexical_evidence((Term("退款", 0.0, "cjk"),), "退款", query_script="cjk") is None
    assert lexical_evidence((Term("退款", 1.0, "cjk"),), "退款", query_script=None) is None


def test_one_script_the_coverage_is_the_found_terms_share_of_the_weight():
    terms = (Term("refund", 1.0, "latin"), Term("timeout", 3.0, "latin"))
    evidence = lexical_evidence(terms, "The Refund is late", query_script="latin")
    assert evidence == lexical.Evidence(0.25, same_script=True)
    assert lexical_evidence(terms, "refund timeout", query_script="latin").coverage == 1.0
    # a query of one term weighing 1 still has evidence
    assert lexical_evidence((Term("退款", 1.0, "cjk"),), "退款", query_script="cjk") == lexical.Evidence(
        1.0, same_script=True
    )


def _cross(comparable_weight: float, other_weight: float):
    """A Chinese query naming an identifier, on an English text that holds the identifier."""
    terms = (
        Term("max_connections", comparable_weight, "latin", identifier=True),
        Term("连接", other_weight, "cjk"),
    )
    return lexical_evidence(terms, "set max_connections above the pool size", query_script="cjk")


def test_across_scripts_the_comparable_terms_must_carry_a_third_of_the_weight():
    at_the_share = _cross(1.0, 2.0)
    assert at_the_share == lexical.Evidence(1.0, same_script=False)
    assert _cross(1.0, 2.1) is None  # 0.32 of the weight


def test_across_scripts_the_coverage_is_over_the_comparable_terms_only():
    terms = (
        Term("max_connections", 1.0, "latin", identifier=True),
        Term("pool", 1.0, "latin"),
        Term("连接", 1.0, "cjk"),
    )
    evidence = lexical_evidence(terms, "max_connections limits every instance", query_script="cjk")
    # "pool" is Latin like the text: comparable, absent; "连接" cannot be looked for in English.
    assert evidence == lexical.Evidence(0.5, same_script=False)


def test_a_text_without_letters_is_compared_with_identifiers_only():
    terms = (Term("10.0.0.1", 1.0, "latin", identifier=True), Term("2024", 1.0, "latin"))
    assert main_script("10.0.0.1 2024") is None
    assert lexical_evidence(terms, "10.0.0.1 2024", query_script="latin") == lexical.Evidence(
        1.0, same_script=False
    )
    # a hand-built term without a script is comparable across scripts only as an identifier
    assert lexical_evidence((Term("2024", 1.0),), "2024", query_script="latin") is None


def test_term_coverage_is_the_same_script_coverage_only():
    terms = (Term("max_connections", 1.0, "latin", identifier=True), Term("连接", 1.0, "cjk"))
    assert term_coverage(terms, "连接池的 max_connections 上限设置", query_script="cjk") == 1.0
    assert term_coverage(terms, "set max_connections", query_script="cjk") is None
    assert term_coverage((), "连接池", query_script="cjk") is None


# --- quotations ------------------------------------------------------------------------------------
RUNBOOK = "日志出现 connection is not available, request timed out 时先查慢查询，再看连接池配置。"


def test_three_query_words_in_a_row_in_the_text_are_a_quotation():
    terms = query_terms("connection is not available")
    evidence = lexical_evidence(terms, RUNBOOK, query_script="latin")
    assert evidence == lexical.Evidence(1.0, same_script=False)


def test_a_query_of_exactly_three_words_can_be_a_quotation():
    quoted = lexical._quoted_latin_words(query_terms("request timed out"), RUNBOOK)
    assert quoted == {"request", "timed", "out"}


def test_a_quotation_at_the_end_of_the_query_counts():
    terms = query_terms("pool exhausted: request timed out")
    quoted = lexical._quoted_latin_words(terms, lexical.text_normalise(RUNBOOK))
    assert quoted == {"request", "timed", "out"}


def test_two_query_words_in_a_row_are_no_quotation():
    # "timed out" alone, and "pool ... timed out" where the text has them apart.
    assert lexical._quoted_latin_words(query_terms("timed out"), RUNBOOK) == frozenset()
    assert lexical._quoted_latin_words(query_terms("pool size timed out"), RUNBOOK) == frozenset()
    assert lexical_evidence(query_terms("pool size timed out"), RUNBOOK, query_script="latin") is None


def test_terms_built_by_hand_hold_no_quotation():
    terms = (Term("connection", 1.0, "latin"), Term("available", 1.0, "latin"), Term("request", 1.0, "latin"))
    assert not isinstance(terms, QueryTerms)
    assert lexical._quoted_latin_words(terms, RUNBOOK) == frozenset()
    assert lexical_evidence(terms, RUNBOOK, query_script="latin") is None
