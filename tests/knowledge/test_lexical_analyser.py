"""The one analyser of the lexical index: the tokens indexed and the tokens asked for agree, and
its signature names what decides them."""

from knowledge.lexical import analyse, analyser_signature, query_tokens
from knowledge.lexical import analyser as analyser_module
from retrieval.lookup.query_terms import bm25_query_text, query_terms


def test_text_is_folded_by_nfkc_and_case_and_cut_by_jieba_with_latin_runs_whole():
    text = "支付超时，网关返回ＥＲＲ＿ＱＵＯＴＡ＿ＥＸＣＥＥＤＥＤ。Set max_connections in java.lang.OutOfMemoryError."
    tokens = analyse(text)
    assert tokens[:2] == ["支付", "超时"]
    assert {"err_quota_exceeded", "max_connections", "java.lang.outofmemoryerror", "set", "in"} <= set(tokens)
    assert not any(ch.isspace() for token in tokens for ch in token)
    assert "，" not in tokens and "。" not in tokens  # punctuation is no term


def test_the_rust_cutter_cuts_as_python_jieba_does():
    """jieba-rs with jieba's dictionary and HMM: the words Python jieba gives (the tokens the
    level model and the quality figures were measured with), unknown names included."""
    import jieba

    from knowledge.lexical.cutter import cut

    texts = [
        "南京市长江大桥建于1968年，是长江上第一座由中国自行设计和建造的双层式铁路、公路两用桥梁。",
        "台湾高铁的左营站位于高雄市左营区，与台铁新左营车站共构。",  # folded Traditional
        "数据库连接池满了以后，新请求会排队等待，直到超时返回错误。",
        "范廷颂枢机，圣名保禄，是越南罗马天主教枢机。",  # names jieba's HMM assembles
    ]
    for text in texts:
        assert cut(text) == jieba.lcut(text), text


def test_a_query_is_cut_as_the_retrieval_side_cuts_it():
    query = "为什么支付超时会返回ERR_QUOTA_EXCEEDED？HikariCP 的 maxUnavailable 怎么设"
    # the retrieval side's key terms, analysed again, come back as they were
    terms = [t.text for t in query_terms(query)]
    assert list(query_tokens(bm25_query_text(query))) == terms
    # and every one of them is a token of the raw query: the same cutting, stop words aside
    assert set(terms) <= set(analyse(query))


def test_a_document_and_a_question_about_it_share_their_key_tokens():
    document = analyse("支付失败排查手册\n超时\n当用户支付超时，先查询订单状态再重试。")
    question = query_tokens(bm25_query_text("支付超时了怎么查询订单状态"))
    assert set(question) <= set(document)


def test_the_signature_names_the_analyser_and_changes_with_the_folding(monkeypatch):
    signature = analyser_signature()
    assert "rjieba/0.2.2" in signature and "fold/opencc-t2s" in signature and "unicode/" in signature
    analyser_signature.cache_clear()
    monkeypatch.setattr(analyser_module, "SCRIPT_FOLD", "none")
    try:
        assert analyser_signature() != signature
    finally:
        analyser_signature.cache_clear()


def test_traditional_and_simplified_text_cut_to_the_same_tokens():
    traditional = analyse("臺灣大學圖書館的開放時間")
    simplified = analyse("台湾大学图书馆的开放时间")
    assert traditional == simplified
    assert query_tokens("圖書館") == query_tokens("图书馆")


def test_a_token_is_a_word_when_a_character_of_it_is_alphanumeric_as_python_says():
    """The analyser's word test is a regex (a chunk's tokens are many); it agrees with
    str.isalnum on every character of the Basic Multilingual Plane and beyond."""
    for code in range(0x30000):
        ch = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        assert bool(analyser_module._ALNUM.search(ch)) == ch.isalnum(), hex(code)
    assert analyse("_ __ -_- ._/ 中_文 x_y ٣٤ ²") == ["中", "文", "x_y", "٣", "٤", "2"]
