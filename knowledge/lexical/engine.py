"""What every lexical engine offers: the interface tantivy and Milvus's BM25 sit behind.

Indexing writes through it (a document's chunks replaced, documents deleted), upkeep reads it
(entries, counts, the analyser the index was built with) and the lookup searches it. An engine
whose lexical side lives in the vector rows (Milvus's BM25 function) takes writes as no-ops: the
rows that carry the vectors carry the text too, and go with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from knowledge.vectorstore import VectorStoreError


class LexicalIndexError(VectorStoreError):
    """The lexical index refused a write or a read, or its writer stayed busy too long.

    A VectorStoreError: to indexing, the vectors and the lexical index are one store written in
    one step, retried and failed together."""


@dataclass(frozen=True)
class LexicalChunk:
    """One chunk as the lexical index holds it."""

    chunk_id: str
    doc_key: str
    domain: str
    chunk_index: int
    #: ``analyse(text)``: what is indexed
    tokens: tuple[str, ...]
    #: the chunk's text as embedded (title, heading path, chunk), returned with hits
    text: str = ""


@dataclass(frozen=True)
class LexicalEntry:
    chunk_id: str
    doc_key: str
    domain: str


@dataclass(frozen=True)
class LexicalHit:
    chunk_id: str
    doc_key: str
    domain: str
    chunk_index: int
    #: the engine's BM25 score: larger is better, comparable only within one search
    score: float
    #: the chunk's text as embedded (title, heading path, chunk); "" when the engine has none
    text: str = ""


class LexicalEngine(Protocol):
    #: "tantivy" or "milvus"
    name: str
    #: whether the index is kept apart from the vectors (and so checked and rebuilt on its own)
    separate: bool

    def documents_replace(self, chunks_by_doc: Mapping[str, Sequence[LexicalChunk]]) -> None:
        """Each named document's entries become exactly these chunks (none: it is removed), all
        documents in one commit."""

    def documents_delete(self, doc_keys: Iterable[str]) -> None: ...

    def entries(self) -> list[LexicalEntry]: ...

    def count(self, *, doc_key: str | None = None) -> int: ...

    def search(
        self,
        tokens: Sequence[str],
        *,
        top_k: int,
        domain: str | Iterable[str] | None = None,
        doc_keys: Iterable[str] | None = None,
    ) -> list[LexicalHit]:
        """The ``top_k`` best chunks for analysed ``tokens`` by BM25, best first; ``domain`` and
        ``doc_keys`` as ``knowledge.vectorstore.domain_filter`` reads them (one, a set, an empty
        set = nothing; ``doc_keys`` None: every document)."""

    def signature_problem(self) -> str:
        """Why the index must be rebuilt before it can be trusted ("" when it need not)."""
