"""The hybrid lookup: one Milvus hybrid_search (dense + BM25), levels from the model's profile moved
by lexical evidence, details naming the L1 and the thresholds' source; and the pure rules."""

import pytest

from retrieval.lookup.lexical import lexical_evidence, main_script
from retrieval.lookup.normalisation import RelevanceLevel, l1_level_decide
from retrieval.lookup.query_terms import query_terms
from retrieval.lookup.thresholds import Thresholds
from retrieval.services import lookup_knowledge


def term_coverage(terms, text, *, query_script):
    """The weighted share of ``terms`` found in ``text`` when both are written in one script."""
    evidence = lexical_evidence(terms, text, query_script=query_script)
    return evidence.coverage if evidence is not None and evidence.same_script else None


SEEDS = Thresholds(max_l2_distance=2.0, highly_relevant=0.75, reference=0.5)


# --- lexical evidence, pure ---------------------------------------------------------------------
def test_question_words_carry_no_weight_and_identifiers_stay_whole(db):
    terms = {t.text: t.weight for t in query_terms("ERR_QUOTA_EXCEEDED 是什么错误？")}
    assert set(terms) == {"err_quota_exceeded", "错误"}
    assert terms["err_quota_exceeded"] > terms["错误"] > 0


def test_coverage_is_the_weighted_share_of_the_terms_found(db):
    terms = query_terms("退款 多久 到账")
    assert term_coverage(terms, "退款一般三天到账", query_script="cjk") == pytest.approx(1.0)
    partial = term_coverage(terms, "退款说明", query_script="cjk")
    assert 0 < partial < 1
    assert term_coverage(terms, "缓存配置", query_script="cjk") == 0.0


def test_no_lexical_evidence_across_scripts(db):
    """An English question shares no words with a Chinese document by nature: no evidence either way."""
    terms = query_terms("How long does a refund take?")
    assert main_script("how long does a refund take?") == "latin"
    assert term_coverage(terms, "退款一般三天到账，状态为 PROCESSING 时请等待", query_script="latin") is None


def test_english_words_weigh_by_their_frequency_and_identifiers_the_most(db):
    terms = {t.text: t for t in query_terms("Which HTTP status comes with ERR_FORBIDDEN?")}
    assert terms["err_forbidden"].identifier and terms["err_forbidden"].weight > terms["status"].weight
    assert terms["status"].weight > terms["comes"].weight  # "comes" is the commoner word
    camel = {t.text: t for t in query_terms("滚动发布时 maxUnavailable 应该怎么设")}
    assert camel["maxunavailable"].identifier


def test_identifiers_are_evidence_across_scripts_and_can_only_raise(db):
    """A Chinese question naming an English document's identifier: the identifier is compared."""
    terms = query_terms("hikaricp_connections_pending 一直大于零说明什么")
    english_doc = "HikariCP tuning: watch hikaricp_connections_pending and maximumPoolSize."
    evidence = lexical_evidence(terms, english_doc, query_script="cjk")
    assert evidence is not None and evidence.coverage == pytest.approx(1.0)
    assert not evidence.same_script
    missing = lexical_evidence(
        terms, "HikariCP tuning: maximumPoolSize and idle timeout.", query_script="cjk"
    )
    assert missing is not None and missing.coverage == 0.0
    # across scripts the evidence never lowers a level
    assert (
        l1_level_decide(similarity=0.5, coverage=0.0, thresholds=SEEDS, can_lower=False)
        == RelevanceLevel.REFERENCE
    )
    assert l1_level_decide(similarity=0.5, coverage=0.0, thresholds=SEEDS) is None
    # a plain English question on a Chinese text still has no evidence either way
    assert (
        lexical_evidence(
            query_terms("How long does a refund take?"), "退款一般三天到账", query_script="latin"
        )
        is None
    )


def test_a_pasted_error_message_is_compared_with_a_document_quoting_it(db):
    """An English error pasted as the question; a Chinese runbook quoting that error."""
    terms = query_terms("Connection is not available, request timed out after 3000ms")
    runbook = "连接池耗尽时，日志出现 Connection is not available, request timed out after 30000ms，请先检查慢查询。"
    evidence = lexical_evidence(terms, runbook, query_script="latin")
    assert evidence is not None and not evidence.same_script
    assert evidence.coverage >= 0.6  # every quoted word found; the timeout value differs
    # two words in a row are no quotation: no evidence either way
    assert lexical_evidence(query_terms("connection timeout"), runbook, query_script="latin") is None


@pytest.mark.parametrize(
    ("similarity", "coverage", "level"),
    [
        (0.8, None, RelevanceLevel.HIGHLY_RELEVANT),  # FS-2 unchanged without evidence
        (0.6, None, RelevanceLevel.REFERENCE),
        (0.4, None, None),
        (0.6, 0.9, RelevanceLevel.HIGHLY_RELEVANT),  # key terms present: one level up
        (0.4, 0.9, RelevanceLevel.REFERENCE),
        (0.8, 0.1, RelevanceLevel.REFERENCE),  # key terms absent: one level down
        (0.6, 0.1, None),
        (0.6, 0.5, RelevanceLevel.REFERENCE),  # in between: no move
    ],
)
def test_lexical_evidence_moves_a_level_by_one(similarity, coverage, level):
    assert l1_level_decide(similarity=similarity, coverage=coverage, thresholds=SEEDS) == level


# --- the lookup on the real hybrid search -------------------------------------------------------


@pytest.fixture
def hybrid_corpus(corpus, settings):
    settings.RETRIEVAL_L1_MODE = "hybrid"
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = None
    settings.RETRIEVAL_REFERENCE_THRESHOLD = None
    corpus.add(
        "refund.md",
        title="退款处理指南",
        domain="payment",
        chunks=["退款申请提交后，原路退回一般三到五个工作日到账；信用卡退款以发卡行入账为准。"],
    )
    corpus.add(
        "cache.md",
        title="缓存集群",
        domain="infra",
        chunks=["Redis 集群的大 key 排查：使用 --bigkeys 扫描，删除时用 UNLINK 而不是 DEL。"],
    )
    corpus.add(
        "pool.md",
        title="数据库连接池",
        domain="infra",
        chunks=["连接池最大连接数建议为 CPU 核数的两倍，所有实例之和不得超过 max_connections。"],
    )
    return corpus


@pytest.mark.django_db
def test_a_question_in_the_document_s_words_is_found_with_lexical_evidence(hybrid_corpus, session_id):
    outcome = lookup_knowledge(query="信用卡退款多久到账", session_id=session_id, dry_run=True)
    assert outcome.body["found"] is True
    assert outcome.body["primary"]["docKey"] == "refund.md"
    details = outcome.details
    assert details["l1_mode"] == "hybrid:rrf"
    assert details["thresholds"]["source"] == "profile:use-multilingual-v3"
    refund = next(c for c in details["l1_candidates"] if c["doc_key"] == "refund.md")
    assert refund["coverage"] >= 0.6 and refund["l1_level"] in ("REFERENCE", "HIGHLY_RELEVANT")


@pytest.mark.django_db
def test_a_question_whose_key_terms_are_absent_is_not_found(hybrid_corpus, session_id):
    outcome = lookup_knowledge(
        query="Kafka 消费者组频繁 rebalance 怎么处理", session_id=session_id, dry_run=True
    )
    assert outcome.body["found"] is False
    assert all(c["l1_level"] is None for c in outcome.details["l1_candidates"])


@pytest.mark.django_db
def test_dense_mode_is_the_vector_alone_without_lexical_evidence(hybrid_corpus, session_id, settings):
    settings.RETRIEVAL_L1_MODE = "dense"
    outcome = lookup_knowledge(query="信用卡退款多久到账", session_id=session_id, dry_run=True)
    assert outcome.details["l1_mode"] == "dense"
    assert outcome.details["query_terms"] == []
    assert all(c["coverage"] is None for c in outcome.details["l1_candidates"])


@pytest.mark.django_db
def test_explicit_thresholds_are_named_as_the_source(hybrid_corpus, session_id, settings):
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.75
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.5
    outcome = lookup_knowledge(query="信用卡退款多久到账", session_id=session_id, dry_run=True)
    assert outcome.details["thresholds"]["source"] == "settings"
    assert outcome.details["thresholds"]["profile"] == "use-multilingual-v3"


def test_the_details_contract_refuses_unknown_and_missing_keys():
    from observability.records import LOOKUP_KEYS, lookup_details

    values = dict.fromkeys(LOOKUP_KEYS)
    assert list(lookup_details(**values)) == list(LOOKUP_KEYS)
    with pytest.raises(TypeError, match="not retrieval_details keys: surprise"):
        lookup_details(**values, surprise=1)
    del values["l1_top_similarity"]
    with pytest.raises(TypeError, match="lacks: l1_top_similarity"):
        lookup_details(**values)


@pytest.mark.django_db
def test_traditional_and_simplified_questions_find_each_other_s_documents(hybrid_corpus, session_id):
    """Both scripts are folded to one for BM25 and the evidence; the documents stay as written."""
    hybrid_corpus.add(
        "library.md",
        title="圖書館開放時間",
        domain="campus",
        chunks=["臺灣大學總圖書館週一至週五開放到晚上十點，週末與國定假日閉館。"],
    )
    simplified = lookup_knowledge(query="台湾大学总图书馆周末开放吗", session_id=session_id, dry_run=True)
    library = next(c for c in simplified.details["l1_candidates"] if c["doc_key"] == "library.md")
    assert simplified.details["l1_candidates"][0]["doc_key"] == "library.md"
    assert library["coverage"] >= 0.6
    traditional = lookup_knowledge(query="信用卡退款多久到帳", session_id=session_id, dry_run=True)
    refund = next(c for c in traditional.details["l1_candidates"] if c["doc_key"] == "refund.md")
    assert traditional.details["l1_candidates"][0]["doc_key"] == "refund.md"
    assert refund["coverage"] >= 0.6
