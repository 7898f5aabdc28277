"""The lexical engine ``milvus``: Milvus's own BM25 function over the chunk text of the vector rows
(Milvus >= 2.5 servers; see ``knowledge.vectorstore``).

The rows that carry the vectors carry the text, so there is nothing to write or delete here and
nothing that can drift apart from the vectors: ``check_index`` checks the rows once, as vectors.
The text is analysed by Milvus (its jieba tokenizer, ``vectorstore.ANALYZER_PARAMS``); a query's
tokens from ``knowledge.lexical.analyser`` are joined by spaces and analysed by it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from knowledge.lexical.engine import LexicalChunk, LexicalEntry, LexicalHit
from knowledge.vectorstore import VectorStore, get_vector_store


class MilvusBm25Engine:
    name = "milvus"
    separate = False

    @property
    def store(self) -> VectorStore:
        return get_vector_store()  # the process-wide one, whatever reset it since

    def documents_replace(self, chunks_by_doc: Mapping[str, Sequence[LexicalChunk]]) -> None:
        return  # written with the vectors (the row's text)

    def documents_delete(self, doc_keys: Iterable[str]) -> None:
        return  # deleted with the vectors

    def entries(self) -> list[LexicalEntry]:
        return [LexicalEntry(e.chunk_id, e.doc_key, e.domain) for e in self.store.entries()]

    def count(self, *, doc_key: str | None = None) -> int:
        return self.store.count(doc_key=doc_key)

    def search(
        self,
        tokens: Sequence[str],
        *,
        top_k: int,
        domain: str | Iterable[str] | None = None,
        doc_keys: Iterable[str] | None = None,
    ) -> list[LexicalHit]:
        text = " ".join(dict.fromkeys(t for t in tokens if t))
        if not text or top_k <= 0 or not self.store.exists():
            return []
        return [
            LexicalHit(hit.chunk_id, hit.doc_key, hit.domain, hit.chunk_index, score, hit.text)
            for hit, score in self.store.bm25_search(text, top_k=top_k, domain=domain, doc_keys=doc_keys)
        ]

    def signature_problem(self) -> str:
        return ""
