"""The action memory holds what was sent: a document one of whose chunks reached the agent (a
supplement, a long primary's window) is not withheld from a question about another part of it;
that part comes back as new content, and DEDUPED only once everything relevant was sent."""

from __future__ import annotations

import pytest

from retrieval.agents.tracker import SessionRetrievals
from retrieval.agents.tracker.base import chunk_mark
from retrieval.agents.tracker.memory import MemoryTracker
from retrieval.services import lookup_knowledge


def test_marks_read_back_as_documents_and_the_chunks_sent():
    memory = SessionRetrievals.from_marks(
        {
            "pay": [chunk_mark("pay/guide.md", 0), "pay/errors.md", chunk_mark("pay/guide.md", 2)],
            "api": ["api/codes.md", chunk_mark("api/codes.md", 1)],
        }
    )
    assert memory.domains == {"pay": ["pay/guide.md", "pay/errors.md"], "api": ["api/codes.md"]}
    assert memory.chunks_sent == {"pay/guide.md": frozenset({0, 2})}  # api/codes.md went whole
    assert memory.holds("pay/guide.md", 0) and memory.holds("pay/guide.md", 2)
    assert not memory.holds("pay/guide.md", 1)
    assert memory.holds("pay/guide.md", None)  # a part we cannot name: the seeds' rule
    assert memory.holds("pay/errors.md", 5) and memory.holds("api/codes.md", 0)
    assert not memory.holds("pay/other.md", 0)


def test_the_in_process_store_keeps_chunk_marks_beside_the_seeds_document_marks():
    tracker = MemoryTracker(ttl=0)
    tracker.mark_many("s", [("pay", chunk_mark("pay/guide.md", 1))])
    assert tracker.is_doc_retrieved("s", "pay/guide.md")  # the seeds' API still answers per document
    assert tracker.get_retrieved_domains("s") == ["pay"]
    assert tracker.snapshot("s").chunks_sent == {"pay/guide.md": frozenset({1})}
    tracker.mark_retrieved("s", "pay", "pay/guide.md")  # then sent whole
    assert tracker.snapshot("s").chunks_sent == {}


@pytest.fixture
def payment_corpus(corpus, settings):
    # Small enough a budget that no document goes whole: each item carries chunks.
    settings.RETRIEVAL_CONTENT_MAX_CHARS = 60
    corpus.add(
        "pay/guide.md",
        title="支付接入指南",
        domain="payment",
        keywords=["PAYX-42", "REFUND-77"],
        chunks=[
            ("签名", "PAYX-42 签名校验失败时，检查商户密钥与签名算法是否一致。"),
            ("退款", "REFUND-77 退款接口超时后，先按退款单号查询退款状态，再决定是否重试。"),
            ("对账", "每日对账文件在凌晨两点生成，可在商户后台下载。"),
        ],
    )
    corpus.add(
        "pay/errors.md",
        title="支付错误码",
        domain="payment",
        keywords=["PAYX-42"],
        chunks=["PAYX-42：签名错误，请核对签名算法。"],
    )
    return corpus


@pytest.mark.django_db
def test_a_document_sent_in_part_returns_its_other_part_then_is_deduped(payment_corpus, session_id):
    def ask(query: str) -> dict:
        return lookup_knowledge(query=query, session_id=session_id, agent="chunk-test").body

    first = ask("PAYX-42")
    sent = {item["docKey"]: item["content"] for item in [first["primary"], *first["supplement"]]}
    assert "pay/guide.md" in sent and "REFUND-77" not in sent["pay/guide.md"]

    other_part = ask("REFUND-77 退款接口超时怎么办")
    assert other_part["found"] is True and other_part["relevanceLevel"] != "DEDUPED"
    assert other_part["primary"]["docKey"] == "pay/guide.md"
    assert "REFUND-77" in other_part["primary"]["content"]
    assert "签名校验" not in other_part["primary"]["content"]  # not what the agent already has
    assert "do not search" not in other_part["message"].lower()

    again = ask("REFUND-77 退款接口超时怎么办")
    assert again["relevanceLevel"] == "DEDUPED"
    assert again["primary"] is None
