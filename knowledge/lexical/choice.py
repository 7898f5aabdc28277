"""Which lexical engine this process uses (``LEXICAL_ENGINE``), decided once and logged.

``auto`` (the default): ``tantivy`` whenever the vector store is milvus-lite (an embedded file or
a ``milvus-lite server``: milvus-lite 3.2.2 scores BM25 in a Python loop, 269 ms against tantivy's
1 ms at 100,000 chunks) or a Milvus server without the BM25 function (before 2.5); ``milvus`` when
``MILVUS_URI`` names a Milvus server that has it. ``tantivy`` / ``milvus`` force one;
``milvus`` on a server without BM25 is refused.

The tantivy index is a folder on this machine: with it, every process that indexes or looks up
must run where ``LEXICAL_INDEX_DIR`` is (as with ``make run``). Deployments over several machines
use a Milvus >= 2.5 server, whose BM25 lives in the collection.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from knowledge.lexical.engine import LexicalEngine
from knowledge.lexical.milvus_bm25 import MilvusBm25Engine
from knowledge.lexical.tantivy_index import TantivyLexicalIndex
from knowledge.milvus_capabilities import is_lite_version
from knowledge.vectorstore import VectorStore, get_vector_store, lexical_engine_name

logger = logging.getLogger(__name__)

LEXICAL_ENGINES = ("auto", "tantivy", "milvus")


@dataclass(frozen=True)
class EngineChoice:
    name: str  # "tantivy" or "milvus"
    reason: str


def lexical_engine_setting() -> str:
    """``LEXICAL_ENGINE``, checked (ImproperlyConfigured names the variable)."""
    value = str(settings.LEXICAL_ENGINE).strip().lower()
    if value not in LEXICAL_ENGINES:
        raise ImproperlyConfigured(
            f"LEXICAL_ENGINE must be one of {', '.join(LEXICAL_ENGINES)}; got {settings.LEXICAL_ENGINE!r}"
        )
    return value


def lexical_engine_decide(*, setting: str, store: VectorStore) -> EngineChoice:
    """The engine for ``setting`` with this vector store (``vectorstore.lexical_engine_name``, which
    the collection's schema follows too), and why. Asks a Milvus server its version
    (VectorStoreError when it does not answer: nothing is decided then)."""
    name = lexical_engine_name(setting, store)
    if setting == "tantivy":
        return EngineChoice(name, "LEXICAL_ENGINE=tantivy")
    if setting == "milvus":
        if not store.supports_bm25():
            raise ImproperlyConfigured(
                f"LEXICAL_ENGINE=milvus needs Milvus >= 2.5 (the BM25 function); {store.uri} reports "
                f"{store.server_version()}. Use LEXICAL_ENGINE=auto or tantivy."
            )
        slow = " (milvus-lite scores BM25 in a Python loop: slow at scale)" if store.is_lite else ""
        return EngineChoice(name, f"LEXICAL_ENGINE=milvus{slow}")
    if store.is_embedded:
        return EngineChoice(name, "auto: MILVUS_URI is an embedded milvus-lite file")
    version = store.server_version()
    if is_lite_version(version):
        return EngineChoice(name, f"auto: MILVUS_URI is a milvus-lite server ({version})")
    has = "has the BM25 function" if name == "milvus" else "has no BM25 function"
    return EngineChoice(name, f"auto: Milvus {version} {has}")


_engine: LexicalEngine | None = None
_choice: EngineChoice | None = None
_engine_lock = threading.Lock()


def get_lexical_engine() -> LexicalEngine:
    """The process-wide lexical engine, decided on first use (and at worker start) and logged."""
    global _engine, _choice
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                store = get_vector_store()
                choice = lexical_engine_decide(setting=lexical_engine_setting(), store=store)
                if choice.name == "tantivy":
                    engine: LexicalEngine = TantivyLexicalIndex(
                        path=settings.LEXICAL_INDEX_DIR,
                        heap_bytes=settings.LEXICAL_WRITER_HEAP_MB * 1_000_000,
                    )
                    where = f" in {settings.LEXICAL_INDEX_DIR}"
                    if not store.is_embedded:
                        where += " (on this machine: web and worker must share it)"
                else:
                    engine, where = MilvusBm25Engine(), f" in collection {store.collection}"
                logger.info("lexical engine: %s%s; %s", choice.name, where, choice.reason)
                _engine, _choice = engine, choice
    return _engine


def lexical_engine_choice() -> EngineChoice:
    """Why this process uses its engine (decides it first if need be)."""
    get_lexical_engine()
    assert _choice is not None
    return _choice


def reset_lexical_engine() -> None:
    """Forget the decision (settings changed, or a test wants a fresh index)."""
    global _engine, _choice
    with _engine_lock:
        _engine, _choice = None, None
