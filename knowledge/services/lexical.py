"""The lexical index kept in step with the database, as the vectors are: written in the indexing
swap, removed with a document, checked and repaired, rebuilt from the stored chunk text.

What a chunk's lexical entry indexes is what its vector embeds and Milvus's BM25 field holds: the
document title, the chunk's heading path and its text (``chunk_embedding_text``), analysed by
``knowledge.lexical.analyser``. An indexing run writes its documents' entries while their
vectors are upserted and before the database swap, in one commit (``documents_lexical_write``),
each document's old entries replaced. A failure before that commit leaves the index as it was; a
failure after it (the vectors' upsert, the swap) is put right by the run's retry or by
``document_lexical_sync``, which rewrites a document's entries from its
chunk rows (or removes them when the document is gone). ``knowledge.services.vectors`` calls it
wherever vectors are pruned, so every path that tidies vectors (a failed run, a document deleted
while indexed, the prune task, ``check_index --repair``) tidies the lexical index too.

Only an engine kept apart from the vectors (tantivy) is written here; with Milvus's BM25 the text
travels in the vector rows and all of this is a no-op.

A document being indexed (PENDING / INDEXING) is left to its own run by the sync and the rebuild;
both read the database while they hold the lexical writer, so a run's write never lands between
their read and their commit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from knowledge.chunking import Chunk
from knowledge.lexical import LexicalChunk, LexicalEntry, analyse, get_lexical_engine
from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
from knowledge.services.chunk_preparation import chunk_embedding_text
from knowledge.services.locks import LockTimeout, document_lock
from knowledge.thread_pools import ProcessThreadPool
from knowledge.vectorstore import VectorStoreError

logger = logging.getLogger(__name__)

_IN_FLIGHT = (ApiDocument.Status.PENDING, ApiDocument.Status.INDEXING)
_ROWS_BATCH = 2000


class LexicalNotSeparate(Exception):
    """The lexical side lives in the Milvus collection: nothing to rebuild apart from the vectors."""


def lexical_chunk(*, doc_key: str, domain: str, chunk_index: int, text: str) -> LexicalChunk:
    return LexicalChunk(
        chunk_id=chunk_id_for(doc_key, chunk_index),
        doc_key=doc_key,
        domain=domain,
        chunk_index=chunk_index,
        tokens=tuple(analyse(text)),
        text=text,
    )


def documents_lexical_prepare(
    documents: Sequence[tuple[ApiDocument, list[Chunk], list[str]]],
) -> Future[dict[str, list[LexicalChunk]]] | None:
    """Start analysing the documents' chunk texts in the background (jieba is most of a lexical
    write's cost), so an indexing run does it while its embedder runs; None when the engine keeps
    no index of its own. ``documents_lexical_write`` takes the result."""
    if not documents:
        return None
    try:
        separate = get_lexical_engine().separate
    except VectorStoreError:
        return None  # the store does not answer: the write after the embedding says so, where it is handled
    return _analysis.submit(_chunks_by_doc, list(documents)) if separate else None


def _chunks_by_doc(
    documents: Sequence[tuple[ApiDocument, list[Chunk], list[str]]],
) -> dict[str, list[LexicalChunk]]:
    return {
        document.doc_key: [
            lexical_chunk(doc_key=document.doc_key, domain=document.domain, chunk_index=c.index, text=text)
            for c, text in zip(chunks, texts, strict=True)
        ]
        for document, chunks, texts in documents
    }


def documents_lexical_write(
    documents: Sequence[tuple[ApiDocument, list[Chunk], list[str]]],
    *,
    prepared: Future[dict[str, list[LexicalChunk]]] | None = None,
) -> None:
    """Replace each document's lexical entries with its new chunks, all in one commit.

    ``documents``: (document, its chunks, the texts its vectors embed), as an indexing run holds
    them; ``prepared``: their analysis started by ``documents_lexical_prepare`` (documents it
    covers are not analysed again). Raises LexicalIndexError (a VectorStoreError) when the index
    refuses the write."""
    engine = get_lexical_engine()
    if not engine.separate or not documents:
        return
    analysed = prepared.result() if prepared is not None else {}
    missing = [d for d in documents if d[0].doc_key not in analysed]
    chunks_by_doc = {**analysed, **_chunks_by_doc(missing)}
    engine.documents_replace(
        {document.doc_key: chunks_by_doc[document.doc_key] for document, _, _ in documents}
    )


#: one analysing thread per process
_analysis = ProcessThreadPool(max_workers=1, thread_name_prefix="agentkb-lexical")


def _stored_chunks(
    document_ids: Iterable[int] | None = None, *, exclude: Iterable[int] = ()
) -> Iterator[LexicalChunk]:
    """The lexical entries the chunk rows call for (all documents, or these), in document order.

    The text is rebuilt as indexing built it (title, heading path, chunk), so no model runs."""
    rows = DocumentChunk.objects.all()
    if document_ids is not None:
        rows = rows.filter(document_id__in=list(document_ids))
    excluded = list(exclude)
    if excluded:
        rows = rows.exclude(document_id__in=excluded)
    fields = (
        "document__doc_key",
        "document__domain",
        "document__title",
        "chunk_index",
        "heading_path",
        "content",
    )
    for doc_key, domain, title, chunk_index, heading_path, content in (
        rows.order_by("document_id", "chunk_index").values_list(*fields).iterator(chunk_size=_ROWS_BATCH)
    ):
        path = tuple(heading_path.split(" > ")) if heading_path else ()
        text = chunk_embedding_text(title=title, heading_path=path, content=content)
        yield lexical_chunk(doc_key=doc_key, domain=domain, chunk_index=chunk_index, text=text)


def document_lexical_sync(*, doc_key: str) -> bool:
    """Make ``doc_key``'s lexical entries exactly its chunk rows (none: the document is gone).

    Left alone while the document is being indexed (its run writes them). Idempotent. Returns
    whether the entries were rewritten or removed."""
    engine = get_lexical_engine()
    if not engine.separate:
        return False
    with engine.writing() as write:
        document = ApiDocument.objects.filter(doc_key=doc_key).values_list("id", "status").first()
        if document is None:
            write.delete(doc_key)
            return True
        if document[1] in _IN_FLIGHT:
            return False
        write.replace(doc_key, _stored_chunks([document[0]]))
        return True


def document_lexical_remove(*, doc_key: str) -> None:
    """Remove every lexical entry of a deleted document."""
    get_lexical_engine().documents_delete([doc_key])


# --- rebuild -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LexicalRebuild:
    documents: int
    chunks: int
    #: documents being indexed, left to their runs
    in_flight: list[str]
    seconds: float
    from_scratch: bool


def lexical_index_rebuild(*, from_scratch: bool = False) -> LexicalRebuild:
    """Rebuild the lexical index from the stored chunk text (no embedding): ``reindex --lexical-only``.

    One commit: searches see the old index until the new one is complete. Documents being indexed
    keep their entries (their runs write them). ``from_scratch`` (or an index of another schema)
    starts from an empty folder instead. Raises LexicalNotSeparate with Milvus's BM25."""
    engine = get_lexical_engine()
    if not engine.separate:
        raise LexicalNotSeparate(
            f"the lexical index is Milvus's BM25 in the vector collection ({engine.name}); "
            "`reindex --recreate` rebuilds it with the vectors"
        )
    started = time.perf_counter()
    fresh = from_scratch or "schema" in engine.signature_problem()
    with engine.writing(fresh=fresh) as write:
        documents = list(ApiDocument.objects.values_list("id", "doc_key", "status"))
        in_flight = {(i, key) for i, key, status in documents if status in _IN_FLIGHT}
        write.delete_all_except(key for _, key in in_flight)
        chunks = 0
        batch: list[LexicalChunk] = []
        for chunk in _stored_chunks(exclude=[i for i, _ in in_flight]):
            batch.append(chunk)
            if len(batch) >= _ROWS_BATCH:
                chunks += write.add(batch)
                batch = []
        chunks += write.add(batch)
        write.mark_rebuilt()
    result = LexicalRebuild(
        documents=len(documents) - len(in_flight),
        chunks=chunks,
        in_flight=sorted(key for _, key in in_flight),
        seconds=time.perf_counter() - started,
        from_scratch=fresh,
    )
    logger.info(
        "lexical index rebuilt: %d documents, %d chunks in %.1f s (%d being indexed left to their runs)",
        result.documents,
        result.chunks,
        result.seconds,
        len(result.in_flight),
    )
    return result


# --- check and repair --------------------------------------------------------------------------
@dataclass
class LexicalReport:
    """What differs between the database and the lexical index (chunk ids / doc keys, sorted)."""

    engine: str
    #: False when the lexical side lives in the vector rows (checked as vectors)
    checked: bool = True
    entries: int = 0
    #: chunk rows of INDEXED documents with no lexical entry
    missing: list[str] = field(default_factory=list)
    #: entries of documents that no longer exist
    orphaned: list[str] = field(default_factory=list)
    #: entries of existing documents with no chunk row
    stale: list[str] = field(default_factory=list)
    #: entries whose domain is not their document's
    wrong_domain: list[str] = field(default_factory=list)
    #: why the whole index must be rebuilt (another analyser or schema); "" when it need not
    rebuild_needed: str = ""
    #: the documents whose entries differ
    drifted_documents: list[str] = field(default_factory=list)
    repaired_documents: list[str] = field(default_factory=list)
    rebuilt: bool = False

    @property
    def ok(self) -> bool:
        return not (self.missing or self.orphaned or self.stale or self.wrong_domain or self.rebuild_needed)

    def as_dict(self) -> dict:
        return {
            "engine": self.engine,
            "checked": self.checked,
            "ok": self.ok,
            "entries": self.entries,
            "missing": self.missing,
            "orphaned": self.orphaned,
            "stale": self.stale,
            "wrong_domain": self.wrong_domain,
            "rebuild_needed": self.rebuild_needed,
            "drifted_documents": self.drifted_documents,
            "repaired_documents": self.repaired_documents,
            "rebuilt": self.rebuilt,
        }


def lexical_entries_read() -> tuple[LexicalReport, list[LexicalEntry]]:
    """The engine's entries, read before the database (as ``index_check`` reads Milvus first)."""
    engine = get_lexical_engine()
    if not engine.separate:
        return LexicalReport(engine=engine.name, checked=False), []
    return LexicalReport(engine=engine.name, rebuild_needed=engine.signature_problem()), engine.entries()


def lexical_compare(
    report: LexicalReport,
    entries: list[LexicalEntry],
    *,
    domains: dict[str, str],
    backed: set[str],
    expected: dict[str, str],
    in_flight: set[str],
) -> LexicalReport:
    """Fill ``report`` from the entries and the database: ``domains`` doc key -> domain of every
    document, ``backed`` chunk ids with a row, ``expected`` chunk id -> doc key of INDEXED
    documents' rows, ``in_flight`` doc keys being indexed (not checked)."""
    if not report.checked:
        return report
    report.entries = len(entries)
    stored: set[str] = set()
    drifted: set[str] = set()
    for entry in entries:
        stored.add(entry.chunk_id)
        if entry.doc_key not in domains:
            report.orphaned.append(entry.chunk_id)
        elif entry.doc_key in in_flight:
            continue
        elif entry.chunk_id not in backed:
            report.stale.append(entry.chunk_id)
        elif entry.domain != domains[entry.doc_key]:
            report.wrong_domain.append(entry.chunk_id)
        else:
            continue
        drifted.add(entry.doc_key)
    for chunk_id, doc_key in expected.items():
        if chunk_id not in stored and doc_key not in in_flight:
            report.missing.append(chunk_id)
            drifted.add(doc_key)
    for name in ("missing", "orphaned", "stale", "wrong_domain"):
        getattr(report, name).sort()
    report.drifted_documents = sorted(drifted)
    return report


def lexical_repair(report: LexicalReport, *, document_ids: dict[str, int]) -> None:
    """Rebuild the index when its analyser or schema is not this code's; otherwise rewrite the
    drifted documents' entries from their rows, each under its indexing lock (a run starting now
    is waited for, not overwritten)."""
    if not report.checked or report.ok:
        return
    if report.rebuild_needed:
        lexical_index_rebuild()
        report.rebuilt = True
        report.repaired_documents = list(report.drifted_documents)
        return
    repaired = []
    for doc_key in report.drifted_documents:
        document_id = document_ids.get(doc_key)
        if document_id is None:
            document_lexical_sync(doc_key=doc_key)
            repaired.append(doc_key)
            continue
        try:
            with document_lock(document_id=document_id, timeout=30):
                if document_lexical_sync(doc_key=doc_key):
                    repaired.append(doc_key)
        except LockTimeout:
            logger.info("check_index: %s is being indexed; its own run writes its lexical entries", doc_key)
    report.repaired_documents = repaired
