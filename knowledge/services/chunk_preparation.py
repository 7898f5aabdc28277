"""A document's chunks and what indexing writes for them: the text each vector embeds, the Milvus
rows and the DocumentChunk rows. Pure: reads settings, writes nothing.

The vector of a chunk embeds ``title``, the heading path (without a leading repeat of the title)
and the chunk text, one per line: a chunk under "超时" in "支付失败排查手册" is found by a
question about payment timeouts even when its text never says "payment".
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from knowledge.chunking import Chunk, chunk_document
from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
from knowledge.vectorstore import ChunkVector


def document_chunks(document: ApiDocument) -> list[Chunk]:
    return chunk_document(
        document.content,
        markdown=(document.metadata or {}).get("format", "markdown") != "text",  # converted = Markdown
        target=settings.CHUNK_TARGET_CHARS,
        overlap=settings.CHUNK_OVERLAP_CHARS,
    )


def chunk_embedding_text(*, title: str, heading_path: tuple[str, ...], content: str) -> str:
    """What a chunk's vector embeds: title, heading path, text (see the module docstring)."""
    path = list(heading_path)
    if path and path[0].strip() == title.strip():
        path = path[1:]
    lines = [title]
    if path:
        lines.append(" > ".join(path))
    lines.append(content)
    return "\n".join(lines)


# What indexing writes for a document's chunks. One place, shared with the lookup tests' corpus
# (tests/retrieval/conftest.py), so the vectors those tests search are the ones production writes.
def chunk_embedding_texts(document: ApiDocument, chunks: list[Chunk]) -> list[str]:
    return [
        chunk_embedding_text(title=document.title, heading_path=c.heading_path, content=c.content)
        for c in chunks
    ]


def chunk_vectors(
    document: ApiDocument, chunks: list[Chunk], *, vectors: Sequence, texts: list[str]
) -> list[ChunkVector]:
    """One Milvus row per chunk: its vector and (for BM25) the text that was embedded."""
    return [
        ChunkVector(
            chunk_id=chunk_id_for(document.doc_key, chunk.index),
            vector=vector.tolist(),
            domain=document.domain,
            doc_key=document.doc_key,
            chunk_index=chunk.index,
            text=text,
        )
        for chunk, vector, text in zip(chunks, vectors, texts, strict=True)
    ]


def chunk_rows(document_id: int, chunks: list[Chunk]) -> list[DocumentChunk]:
    return [
        DocumentChunk(
            document_id=document_id,
            chunk_index=c.index,
            heading_path=c.heading_path_text[:1024],
            content=c.content,
            pages=c.pages_text,
        )
        for c in chunks
    ]
