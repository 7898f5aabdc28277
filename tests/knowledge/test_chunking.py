"""Chunking invariants: fences and tables whole, all text covered, sizes kept, heading paths right."""

import itertools
import random
import re

import pytest

from knowledge.chunking import chunk_document, split_sentences, text_size

ZH = [
    "数据库连接池的大小要根据实例规格来定。",
    "支付超时的时候不能直接重试下单！",
    "先用商户订单号查询渠道的支付结果；",
    "退款到账时间取决于支付方式？",
    "大 key 会阻塞单线程的 Redis。",
]
EN = [
    "The pool size should match the instance size.",
    "Never retry a payment blindly after a timeout!",
    "Query the channel with the merchant order number first.",
    "Refunds to credit cards take three to seven working days.",
    "e.g. a value above 1 MB is a big key.",
]


def _paragraph(rng: random.Random) -> str:
    sentences = [rng.choice(ZH + EN) for _ in range(rng.randint(1, 30))]
    return "".join(s if re.search(r"[\u4e00-\u9fff]", s) else s + " " for s in sentences).strip()


def _fence(rng: random.Random) -> str:
    lines = [
        f"# not a heading {i}" if i % 5 == 0 else f"value_{i} = {i}  # 注释"
        for i in range(rng.randint(1, 60))
    ]
    return "```python\n" + "\n".join(lines) + "\n```"


def _table(rng: random.Random) -> str:
    rows = [f"| ERR_{i} | 含义 {i} | retry {i % 2 == 0} |" for i in range(rng.randint(1, 50))]
    return "| code | meaning | retry |\n|---|---|---|\n" + "\n".join(rows)


def generated_document(seed: int) -> str:
    rng = random.Random(seed)
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.2:
            parts.append(
                "#" * rng.randint(1, 4) + " " + rng.choice(["超时", "Timeouts", "退款 Refunds", "Pool"])
            )
        elif kind < 0.35:
            parts.append(_fence(rng))
        elif kind < 0.5:
            parts.append(_table(rng))
        else:
            parts.append(_paragraph(rng))
    return "\n\n".join(parts)


def _blocks(text: str, pattern: str) -> list[str]:
    return re.findall(pattern, text, flags=re.S | re.M)


FENCE = r"^```python\n.*?\n```$"
TABLE = r"^\| code \| meaning \| retry \|\n\|---\|---\|---\|(?:\n\|[^\n]*\|)*"
SEEDS = range(60)


@pytest.mark.parametrize("target, overlap", [(800, 100), (200, 50), (120, 0)])
def test_generated_documents_keep_every_invariant(target, overlap):
    for seed in SEEDS:
        body = generated_document(seed)
        chunks = chunk_document(body, target=target, overlap=overlap)

        assert [c.index for c in chunks] == list(range(len(chunks)))
        # All text covered, in order, nothing twice: the chunks' own texts are the document.
        assert re.sub(r"\s", "", "".join(c.own_text for c in chunks)) == re.sub(r"\s", "", body), seed
        # Fences and tables land whole in one chunk.
        for block in _blocks(body, FENCE) + _blocks(body, TABLE):
            assert any(block in c.content for c in chunks), (seed, block[:40])
        for chunk in chunks:
            # Sizes: a chunk exceeds the target only by an oversized fence/table it holds whole,
            # or by the heading lines glued to its first piece.
            whole_blocks = _blocks(chunk.content, FENCE) + _blocks(chunk.content, TABLE)
            headings = sum(text_size(h) for h in re.findall(r"^#{1,6} .*$", chunk.own_text[:200], flags=re.M))
            if not any(text_size(b) > target // 2 for b in whole_blocks):
                assert text_size(chunk.content) <= target + headings + 4, (seed, chunk.index)
            assert chunk.content.strip()


def test_a_fence_larger_than_the_target_is_one_chunk_and_its_comment_lines_are_not_headings():
    fence = "```bash\n" + "\n".join(f"# step {i}\necho {i}" for i in range(100)) + "\n```"
    body = f"# Deploy\n\nintro\n\n{fence}\n\nafter"
    chunks = chunk_document(body, target=200, overlap=20)
    holding = [c for c in chunks if "```bash" in c.content]
    assert len(holding) == 1 and fence in holding[0].content
    assert {c.heading_path for c in chunks} == {("Deploy",)}


def test_a_table_larger_than_the_target_stays_whole():
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | 第{i}行 |" for i in range(80))
    chunks = chunk_document(f"## Codes\n\n{table}", target=100, overlap=0)
    assert len(chunks) == 1 and table in chunks[0].content


def test_an_unclosed_fence_runs_to_the_end_and_hides_the_headings_inside():
    chunks = chunk_document("# A\n\ntext\n\n```\n# B\ncode", target=800)
    assert [c.heading_path for c in chunks] == [("A",)]


def test_heading_paths_follow_the_heading_levels():
    body = "# Guide\n\nintro\n\n## Pool\n\npool text\n\n### Size\n\nsize text\n\n## Timeouts\n\ntimeout text"
    paths = [c.heading_path_text for c in chunk_document(body, target=800)]
    assert paths == ["Guide", "Guide > Pool", "Guide > Pool > Size", "Guide > Timeouts"]


def test_a_heading_with_no_text_of_its_own_is_carried_into_the_next_chunk():
    chunks = chunk_document("# 支付失败排查手册\n\n## 支付超时\n\n先查询订单状态。", target=800)
    assert len(chunks) == 1
    assert chunks[0].heading_path_text == "支付失败排查手册 > 支付超时"
    assert chunks[0].content.startswith("# 支付失败排查手册\n\n## 支付超时")


def test_cjk_counts_double_so_a_chinese_chunk_holds_half_the_characters():
    zh = "回调丢失时请检查网络。" * 100  # 1,000 characters
    en = "Check the network. " * 53  # about 1,000 characters
    zh_chunks = chunk_document(zh, target=400, overlap=0)
    en_chunks = chunk_document(en, target=400, overlap=0)
    assert max(len(c.content) for c in zh_chunks) <= 200
    assert max(len(c.content) for c in en_chunks) > 300
    assert len(zh_chunks) > len(en_chunks)


def test_chinese_is_split_at_sentence_ends_not_mid_sentence():
    zh = "".join(f"第{i}句话讲的是连接池。" for i in range(60))
    for chunk in chunk_document(zh, target=200, overlap=0):
        assert chunk.content.endswith("。")


def test_neighbouring_chunks_overlap_by_whole_sentences():
    body = " ".join(f"Sentence number {i} is here." for i in range(40))
    chunks = chunk_document(body, target=200, overlap=60)
    assert len(chunks) > 2
    for previous, chunk in itertools.pairwise(chunks):
        repeated = chunk.content[: chunk.overlap_chars].strip()
        assert repeated and previous.content.endswith(repeated)
        assert re.fullmatch(r"(Sentence number \d+ is here\. ?)+", repeated)


def test_no_overlap_across_headings_or_out_of_a_fence():
    body = "## A\n\n" + "Alpha text. " * 30 + "\n\n```\ncode\n```\n\nafter the fence\n\n## B\n\nBeta."
    chunks = chunk_document(body, target=150, overlap=50)
    b = next(c for c in chunks if c.heading_path == ("B",))
    assert b.overlap_chars == 0
    after = next(c for c in chunks if "after the fence" in c.content)
    assert "code" not in after.content[: after.overlap_chars]


def test_plain_text_has_no_headings_or_fences():
    chunks = chunk_document("# not a heading\n\n```\nnot a fence", markdown=False, target=800)
    assert len(chunks) == 1 and chunks[0].heading_path == ()


def test_a_long_word_without_spaces_is_cut_anyway():
    chunks = chunk_document("x" * 1000, target=100, overlap=0)
    assert "".join(c.content for c in chunks) == "x" * 1000
    assert all(len(c.content) <= 100 for c in chunks)


def test_split_sentences_gives_the_text_back():
    text = "第一句。第二句！Third one. Fourth? 「引号。」最后"
    assert "".join(split_sentences(text)) == text
    assert split_sentences(text)[0] == "第一句。"


def test_too_small_a_target_is_refused():
    with pytest.raises(ValueError, match="CHUNK_TARGET_CHARS"):
        chunk_document("text", target=10)
