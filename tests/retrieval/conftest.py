"""Fixtures for the lookup: a corpus written straight into the database and Milvus with the real
embedder and vector store, a fresh action memory, and API clients with agent tokens.

The corpus helper writes what the ingestion pipeline writes (an INDEXED ApiDocument with its
keywords/aliases in metadata, DocumentChunk rows and one vector per chunk built by ingestion's own
helpers), without its chunker, so a test chooses its chunks; these tests depend on the lookup alone.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from knowledge.chunking import Chunk
from knowledge.embeddings import get_embedder
from knowledge.models import ApiDocument, DocumentChunk
from knowledge.services.chunk_preparation import chunk_embedding_texts, chunk_rows, chunk_vectors
from knowledge.services.lexical import document_lexical_remove, documents_lexical_write
from knowledge.vectorstore import VectorStore
from retrieval.agents.tokens import tool_token_issue
from retrieval.agents.tracker import reset_tracker
from retrieval.lookup.corpus import corpus_signature_forget
from retrieval.lookup.filtering import document_filters_clear
from retrieval.lookup.keyword_index import keyword_index_forget
from retrieval.lookup.thresholds import thresholds_cache_clear
from retrieval.lookup.vector_search import l1_caches_clear


def _forget_process_state() -> None:
    corpus_signature_forget()
    keyword_index_forget()
    l1_caches_clear()
    document_filters_clear()
    thresholds_cache_clear()
    reset_tracker()


@pytest.fixture(autouse=True)
def _fresh_retrieval_state(settings):
    """Every test sees the database as it is now (no refresh interval) and a fresh tracker."""
    settings.RETRIEVAL_INDEX_REFRESH_MS = 0
    _forget_process_state()
    yield
    _forget_process_state()


@pytest.fixture
def seeds_rules(settings):
    """The seeds' rules exactly as FS-1..FS-6 state them: the seeds' thresholds (0.75 / 0.5, what
    the seed corpus below was written for) and levels from the dense similarity alone (dense L1,
    so no lexical evidence moves a level), decided by the thresholds rather than the level model
    (``RETRIEVAL_LEVELS=thresholds``). The hybrid lookup is tested in test_hybrid_lookup.py."""
    settings.RETRIEVAL_LEVELS = "thresholds"
    settings.RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = 0.75
    settings.RETRIEVAL_REFERENCE_THRESHOLD = 0.5
    settings.RETRIEVAL_L1_MODE = "dense"


@pytest.fixture
def session_id() -> str:
    """A session id of this test alone (the Redis store is shared by concurrent test runs)."""
    return f"test-{uuid.uuid4().hex}"


@dataclass
class Corpus:
    store: VectorStore

    def add(
        self,
        doc_key: str,
        *,
        title: str,
        domain: str,
        chunks: list[str | tuple[str, str]],
        keywords: list[str] | str | None = None,
        aliases: list[str] | None = None,
        status: str = ApiDocument.Status.INDEXED,
    ) -> ApiDocument:
        """One document; each chunk is ``content`` or ``(heading, content)`` (its heading path is
        the title, then the heading). Chunk rows, vectors and their BM25 text come from
        ingestion's own helpers (``chunk_embedding_texts``, ``chunk_vectors``, ``chunk_rows``):
        what L1 compares a query with is title + heading + content, as production writes it."""
        pairs = [c if isinstance(c, tuple) else ("", c) for c in chunks]
        metadata: dict = {}
        if keywords is not None:
            metadata["keywords"] = keywords
        if aliases is not None:
            metadata["aliases"] = aliases
        content = "\n\n".join(text for _, text in pairs)
        document = ApiDocument.objects.create(
            doc_key=doc_key,
            title=title,
            domain=domain,
            content=content,
            content_hash=hashlib.sha256(content.encode()).hexdigest(),
            metadata=metadata,
            status=status,
            chunk_count=len(pairs),
            indexed_at=timezone.now() if status == ApiDocument.Status.INDEXED else None,
        )
        parts = [
            Chunk(index=i, heading_path=(title, heading) if heading else (title,), content=text)
            for i, (heading, text) in enumerate(pairs)
        ]
        DocumentChunk.objects.bulk_create(chunk_rows(document.id, parts))
        texts = chunk_embedding_texts(document, parts)
        self.store.upsert(chunk_vectors(document, parts, vectors=_encode(texts), texts=texts))
        documents_lexical_write([(document, parts, texts)])  # as an indexing run writes both
        return document

    def delete(self, doc_key: str) -> None:
        ApiDocument.objects.filter(doc_key=doc_key).delete()
        self.store.delete_document(doc_key)
        document_lexical_remove(doc_key=doc_key)


# The embedder's vector of each text it was given in this process: the model is deterministic, so
# a corpus written again by a later test gets the very vectors it got the first time, without the
# embedder's run (the seeds' corpus is written by some twenty tests).
_vectors: dict[tuple[str, str], list[float]] = {}


def _encode(texts: list[str]) -> list[list[float]]:
    embedder = get_embedder()
    missing = [t for t in dict.fromkeys(texts) if (embedder.model_name, t) not in _vectors]
    if missing:
        for text, vector in zip(missing, embedder.encode(missing), strict=True):
            _vectors[embedder.model_name, text] = vector
    return [_vectors[embedder.model_name, t] for t in texts]


@pytest.fixture
def corpus(vector_store) -> Corpus:
    """An empty corpus on a fresh Milvus collection (add documents with ``corpus.add``)."""
    embedder = get_embedder()
    vector_store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    return Corpus(vector_store)


@pytest.fixture(scope="session")
def _reused_collection(tmp_path_factory):
    """The name of one Milvus collection the lookup tests share, and the folder of their lexical
    index (see ``reused_corpus``)."""
    from django.conf import settings as django_settings

    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name, str(tmp_path_factory.mktemp("reused-lexical"))
    store = VectorStore(uri=django_settings.MILVUS_URI, collection=name)
    try:
        store.drop()
    finally:
        store.reset()


@pytest.fixture
def reused_corpus(settings, _reused_collection) -> Corpus:
    """An empty corpus like ``corpus``, on a collection the lookup tests share and empty after
    each test. Creating a collection costs a second (pymilvus waits half a second for each of
    its two indexes), more than most lookup tests; deleted rows are gone from every search at
    once, so an emptied collection answers as a fresh one does. A test module opts in by
    defining its own ``corpus`` fixture returning this one (tests/retrieval/test_lookup.py)."""
    from knowledge.lexical import get_lexical_engine, reset_lexical_engine
    from knowledge.vectorstore import get_vector_store, reset_vector_store

    settings.MILVUS_COLLECTION, settings.LEXICAL_INDEX_DIR = _reused_collection
    reset_vector_store()
    reset_lexical_engine()
    store = get_vector_store()
    embedder = get_embedder()
    store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    yield Corpus(store)
    # The test may have pointed the process's store elsewhere (Milvus down): empty the
    # collection through this store, which still points at it.
    try:
        store.delete_chunks(sorted(store.chunk_ids()))
        assert store.count() == 0, "the shared lookup collection was not emptied"
        # The lexical engine is chosen by the store the process sees: this one again.
        settings.MILVUS_URI = store.uri
        reset_vector_store()
        reset_lexical_engine()
        lexical = get_lexical_engine()
        lexical.documents_delete({entry.doc_key for entry in lexical.entries()})
        assert lexical.count() == 0, "the shared lexical index was not emptied"
    finally:
        store.reset()
        reset_vector_store()
        reset_lexical_engine()


def seed_documents(corpus: Corpus) -> None:
    """The seeds' world (seed 000 section 7): infrastructure, api and troubleshooting documents.

    Chunk texts are chosen so the real embedder (USE multilingual), on the text ingestion embeds
    (title, heading, content), puts the seeds' scenario queries where the seeds put them:
    "数据库连接池配置" above 0.75 on the pool document (0.797), "故障排查" in [0.5, 0.75) on the
    incident document (0.662), "ERR_TIMEOUT" an exact keyword.
    """
    corpus.add(
        "infrastructure/mysql-pool.md",
        title="MySQL 连接池配置说明",
        domain="infrastructure",
        keywords=["maximumPoolSize", "minimumIdle"],
        chunks=[
            ("概述", "数据库连接池配置\n如何配置数据库连接池"),
            ("参数", "maximumPoolSize 建议设为 CPU 核数的两倍，minimumIdle 与之相同。"),
        ],
    )
    corpus.add(
        "infrastructure/hikaricp.md",
        title="HikariCP 参数说明",
        domain="infrastructure",
        keywords=["HikariCP", "connectionTimeout"],
        chunks=[
            ("概述", "HikariCP 参数说明"),
            ("超时", "connectionTimeout：获取连接的最长等待时间（毫秒）。"),
        ],
    )
    corpus.add(
        "infrastructure/pool-exhaustion.md",
        title="连接池耗尽排查",
        domain="infrastructure",
        keywords=["Connection is not available"],
        chunks=["连接池耗尽的排查：检查慢查询和连接泄漏"],
    )
    corpus.add(
        "infrastructure/redis-cache.md",
        title="Redis 缓存配置指南",
        domain="infrastructure",
        keywords=["Redis", "maxmemory"],
        chunks=["Redis 缓存的过期策略、最大内存和淘汰策略配置。"],
    )
    corpus.add(
        "api/error-codes.md",
        title="网关错误码说明",
        domain="api",
        keywords=["ERR_TIMEOUT", "ERR_AUTH_FAILED"],
        chunks=[
            ("鉴权", "ERR_AUTH_FAILED：令牌无效或过期，请重新获取令牌。"),
            ("超时", "ERR_TIMEOUT：请求超时错误码，上游服务没有在规定时间内响应，客户端应当重试。"),
        ],
    )
    corpus.add(
        "troubleshooting/incident-process.md",
        title="故障处理与排查流程",
        domain="troubleshooting",
        keywords=["止损", "复盘"],
        chunks=["故障排查", "发生生产事故时先止损，再定位根因，最后复盘。"],
    )
    corpus.add(
        "troubleshooting/log-analysis.md",
        title="日志分析指南",
        domain="troubleshooting",
        keywords=["请求 ID", "错误堆栈"],
        chunks=["日志分析指南：如何分析应用日志", "按请求 ID 过滤日志，查看错误堆栈，统计异常频率。"],
    )
    corpus.add(
        "payment/refund.md",
        title="退款处理指南",
        domain="payment",
        keywords=["退款"],
        chunks=["退款未到账、退款状态异常的处理步骤。"],
    )


# CJK ideographs and the full-width punctuation Chinese text uses (，。（）《》「」、：): what an
# English-speaking agent must never read.
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def english_documents(corpus: Corpus) -> None:
    """A small English corpus (for the agent-language tests): a connection-pool document with a
    keyword, one on pool exhaustion without, and gateway error codes with the exact keyword
    ERR_TIMEOUT (a lookup of it is PRECISE)."""
    corpus.add(
        "ops/connection-pool.md",
        title="Database connection pool settings",
        domain="ops",
        keywords=["maximumPoolSize"],
        chunks=["Database connection pool settings: how to configure the database connection pool size"],
    )
    corpus.add(
        "ops/pool-exhaustion.md",
        title="Connection pool exhaustion",
        domain="ops",
        chunks=["When the connection pool is exhausted: find slow queries and leaked connections"],
    )
    corpus.add(
        "api/error-codes.md",
        title="Gateway error codes",
        domain="api",
        keywords=["ERR_TIMEOUT"],
        chunks=["ERR_TIMEOUT: the upstream service did not answer in time; the client should retry."],
    )


@pytest.fixture
def english_corpus(corpus) -> Corpus:
    english_documents(corpus)
    return corpus


@pytest.fixture
def seeded_corpus(corpus) -> Corpus:
    seed_documents(corpus)
    return corpus


@pytest.fixture
def agent_client(db) -> APIClient:
    """An API client authenticated with a fresh agent token."""
    token = tool_token_issue(name=f"agent-{uuid.uuid4().hex[:8]}")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client
