"""Parsing uploaded files: formats, encodings, frontmatter variants and the errors staff see."""

import pytest

from knowledge.parsing import DocumentParseError, parse_document, render_document

FULL = """---
title: 支付失败排查手册
domain: payment
keywords: [支付失败, ERR_PAY_TIMEOUT]
aliases:
  - payment failed
covers: [支付超时, 扣款无回调]
when_to_retrieve: 用户描述支付失败、超时时
description: How to investigate failed payments
owner: team-pay
---

# 支付失败排查手册

先查询订单状态。
"""


def test_full_frontmatter_fills_title_domain_and_metadata():
    doc = parse_document(FULL.encode(), name="payment/handbook.md")

    assert (doc.doc_key, doc.title, doc.domain) == ("payment/handbook.md", "支付失败排查手册", "payment")
    assert doc.body.startswith("# 支付失败排查手册") and "---" not in doc.body
    m = doc.metadata
    assert m["keywords"] == ["支付失败", "ERR_PAY_TIMEOUT"]
    assert m["aliases"] == ["payment failed"]
    assert m["covers"] == ["支付超时", "扣款无回调"] and m["covers_source"] == "manual"
    assert m["when_to_retrieve"] == "用户描述支付失败、超时时" and m["when_to_retrieve_source"] == "manual"
    assert m["description"] == "How to investigate failed payments"
    assert m["extra"] == {"owner": "team-pay"}
    assert len(doc.content_hash) == 64


def test_category_is_an_alias_of_domain():
    doc = parse_document(b"---\ncategory: infrastructure\n---\n# Pool\n\ntext", name="pool.md")
    assert doc.domain == "infrastructure"


def test_without_frontmatter_the_title_is_the_first_heading_and_the_domain_the_chosen_one():
    doc = parse_document(b"intro line\n\n## Second level first\n\n# Later", name="notes.md", domain="infra")
    assert (doc.title, doc.domain) == ("Second level first", "infra")
    assert "covers" not in doc.metadata and "when_to_retrieve" not in doc.metadata
    assert doc.metadata["keywords"] == [] and doc.metadata["aliases"] == []


def test_a_heading_inside_a_code_fence_is_not_the_title():
    doc = parse_document(b"```bash\n# not a title\n```\n\ntext", name="deploy-notes.md", domain="infra")
    assert doc.title == "deploy-notes"


def test_plain_text_takes_its_title_from_the_file_name_and_keeps_dashes():
    doc = parse_document(
        b"---\nnot: frontmatter\n---\n# not a heading either", name="dir/readme.txt", domain="x"
    )
    assert doc.title == "readme"
    assert doc.body.startswith("---")  # .txt has no frontmatter
    assert doc.metadata["format"] == "text"


def test_frontmatter_domain_wins_over_the_chosen_one():
    doc = parse_document(b"---\ndomain: payment\n---\ntext", name="a.md", domain="infra")
    assert doc.domain == "payment"


def test_keywords_as_a_comma_separated_string_are_accepted():
    doc = parse_document("---\nkeywords: 退款, refund，到账\n---\ntext".encode(), name="a.md", domain="p")
    assert doc.metadata["keywords"] == ["退款", "refund", "到账"]


def test_utf8_with_bom_and_windows_newlines():
    data = b"\xef\xbb\xbf---\r\ntitle: BOM\r\ndomain: d\r\n---\r\nline one\r\nline two\r\n"
    doc = parse_document(data, name="bom.md")
    assert doc.title == "BOM" and doc.body == "line one\nline two"
    assert doc.metadata["encoding"] == "utf-8-sig"


def test_gb18030_is_read():
    text = "---\ntitle: 退款处理指南\ndomain: payment\n---\n# 退款\n\n退款未到账怎么办？"
    doc = parse_document(text.encode("gb18030"), name="refund.md")
    assert doc.title == "退款处理指南" and "退款未到账怎么办" in doc.body
    assert doc.metadata["encoding"] == "gb18030"


def test_utf8_and_gb18030_copies_of_one_document_hash_alike():
    text = "---\ndomain: payment\n---\n# 退款\n\n退款未到账怎么办？"
    assert (
        parse_document(text.encode("utf-8"), name="r.md").content_hash
        == parse_document(text.encode("gb18030"), name="r.md").content_hash
    )


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "file: is empty"),
        ("# 标题\n\n正文".encode("utf-16"), "file: is binary or UTF-16"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "its bytes are a PNG image; the extension does not match"),
        (b"caf\xe9 \xff\xfe", "file: is neither UTF-8 nor GB18030"),
    ],
)
def test_bytes_that_are_not_utf8_or_gb18030_are_refused(data, message):
    with pytest.raises(DocumentParseError, match=message):
        parse_document(data, name="x.md", domain="d")


def test_unsupported_format_is_refused_naming_the_formats():
    with pytest.raises(DocumentParseError, match=r"file: 'x.rtf' is not a supported format \(use .md"):
        parse_document(b"text", name="x.rtf", domain="d")


def test_broken_yaml_is_refused_with_its_line():
    data = b"---\ntitle: ok\nkeywords: [a, b\ndomain: d\n---\ntext"
    with pytest.raises(DocumentParseError) as info:
        parse_document(data, name="x.md")
    assert info.value.field == "frontmatter"
    assert "invalid YAML at line" in str(info.value)


def test_unclosed_frontmatter_is_refused():
    with pytest.raises(DocumentParseError, match="frontmatter: starts with '---' but has no closing"):
        parse_document(b"---\ntitle: x\n\ntext", name="x.md", domain="d")


def test_frontmatter_that_is_not_a_mapping_is_refused():
    with pytest.raises(DocumentParseError, match="frontmatter: must be a mapping"):
        parse_document(b"---\n- a\n- b\n---\ntext", name="x.md", domain="d")


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pure-python"])
def test_yaml_aliases_are_refused_so_a_billion_laughs_cannot_expand(libyaml, monkeypatch):
    import yaml

    if not libyaml:  # PyYAML built without libyaml: the pure loader's own check
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    elif not getattr(yaml, "CSafeLoader", None):
        pytest.skip("PyYAML without libyaml here")
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n---\ntext"
    with pytest.raises(
        DocumentParseError, match=r"invalid YAML at line 3: YAML aliases \(\*name\) are not allowed"
    ):
        parse_document(bomb.encode(), name="x.md", domain="d")
    # and a plain frontmatter loads the same either way
    doc = parse_document(b"---\ndomain: d\nkeywords: [a, \xe8\xb6\x85\xe6\x97\xb6]\n---\ntext", name="x.md")
    assert doc.metadata["keywords"] == ["a", "超时"]


@pytest.mark.parametrize(
    "front, message",
    [
        ("keywords: {a: 1}", "keywords: must be a list of strings, got dict"),
        ("keywords: [[nested]]", r"keywords\[1\]: must be a string, got list"),
        ("title: [a, b]", "title: must be a string, got list"),
        ("domain: has space", "domain: 'has space' may hold only letters"),
        ("domain: a/b", "domain: 'a/b' may hold only letters"),
        ("category: " + "x" * 65, "category: .* longer than 64"),
        ("domain: [a]", "domain: must be a string, got list"),
        ("when_to_retrieve: {x: 1}", "when_to_retrieve: must be a string"),
    ],
)
def test_wrong_types_are_refused_naming_the_field(front, message):
    with pytest.raises(DocumentParseError, match=message):
        parse_document(f"---\n{front}\n---\ntext".encode(), name="x.md", domain="d")


def test_no_domain_anywhere_is_an_error_that_says_what_to_do():
    with pytest.raises(DocumentParseError) as info:
        parse_document(b"# Title\n\ntext", name="x.md")
    assert info.value.field == "domain"
    assert "choose one" in str(info.value)


def test_a_file_with_only_frontmatter_is_refused():
    with pytest.raises(DocumentParseError, match="file: has no text besides its frontmatter"):
        parse_document(b"---\ndomain: d\n---\n\n", name="x.md")


@pytest.mark.parametrize("name", ["../etc/passwd.md", "a/../../b.md", "", "/"])
def test_doc_keys_that_climb_out_or_are_empty_are_refused(name):
    with pytest.raises(DocumentParseError, match="doc_key"):
        parse_document(b"text", name=name, domain="d")


def test_doc_keys_are_normalised():
    assert parse_document(b"t", name="\\infra\\./pool.md", domain="d").doc_key == "infra/pool.md"


def test_render_then_parse_gives_the_same_document():
    doc = parse_document(FULL.encode(), name="payment/handbook.md")
    rendered = render_document(
        title=doc.title, domain=doc.domain, body=doc.body, metadata=doc.metadata, fmt="markdown"
    )
    again = parse_document(rendered.encode(), name="payment/handbook.md")
    assert again.content_hash == doc.content_hash
    assert again.metadata["extra"] == {"owner": "team-pay"}


def test_derived_title_and_domain_survive_a_render_round_trip():
    doc = parse_document(b"# From heading\n\ntext", name="x.md", domain="infra")
    rendered = render_document(
        title=doc.title, domain=doc.domain, body=doc.body, metadata=doc.metadata, fmt="markdown"
    )
    assert parse_document(rendered.encode(), name="x.md").content_hash == doc.content_hash
