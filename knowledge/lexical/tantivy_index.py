"""The lexical index on the embedded default: a tantivy index in a folder (``LEXICAL_INDEX_DIR``).

One tantivy document per chunk: ``chunk_id``, ``doc_key``, ``domain`` (whole strings, for deletes
and the domain filter), ``chunk_index``, ``terms`` (the analyser's tokens, read back by a
whitespace tokenizer, scored by BM25) and ``text`` (the chunk's text as embedded, stored only,
returned with hits). Numbers go in with ``add_unsigned``: tantivy 0.27's ``Document(field=1)``
passes an i64, which panics the writer on an unsigned field.

Writers: one at a time, across processes. A write takes an ``flock`` on ``agentkb-writer.lock``
in the folder (several Celery worker processes, the web process during ``setup_demo``), opens a
tantivy writer, deletes and adds, commits once, waits for the merges it started and drops the
writer. A write either commits whole or not at all: a process killed mid-write leaves the index
as its last commit left it (tantivy's own meta file is replaced atomically at commit), and the
OS releases both locks with the process.

Readers: any process. Before each search the reader compares ``meta.json`` (one ``stat``) with what
it last loaded and reloads when a commit happened, so a commit from another process is searched
at once, without a restart. Should two commits leave ``meta.json`` looking the same to ``stat``
(same size, a reused inode, one clock tick), tantivy's own reader policy (it polls the file's
content about every 500 ms) reloads all the same.

``agentkb-lexical.json`` beside tantivy's files records the schema version and the analyser
signature the index was built with; ``signature_problem`` reports a mismatch (the fix is
``reindex --lexical-only``, which rebuilds in place or, after a schema change, from scratch).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import tantivy

from config.file_locks import file_lock
from knowledge.lexical.analyser import analyser_signature
from knowledge.lexical.engine import LexicalChunk, LexicalEntry, LexicalHit, LexicalIndexError

logger = logging.getLogger(__name__)

#: bump when the fields below change: an index of another version is rebuilt from scratch
SCHEMA_VERSION = 1
META_FILE = "agentkb-lexical.json"
LOCK_FILE = "agentkb-writer.lock"
_KEY = "agentkb_key"  # a whole string, any length (tantivy's "raw" drops tokens over 255 bytes)
_WORDS = "agentkb_words"  # the analyser's tokens, separated by spaces
#: tantivy's floor is 15 MB per writer thread
MIN_HEAP_BYTES = 15_000_000


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for name in ("chunk_id", "doc_key", "domain"):
        builder.add_text_field(name, stored=True, tokenizer_name=_KEY, index_option="basic")
    builder.add_unsigned_field("chunk_index", stored=True)
    builder.add_text_field("terms", stored=False, tokenizer_name=_WORDS, index_option="freq")
    # Stored only (as UTF-8 bytes: a text field would also index the whole text as one term).
    builder.add_bytes_field("text", stored=True, indexed=False)
    return builder.build()


def _register_tokenizers(index: tantivy.Index) -> None:
    # Registered per opened index, in every process: tantivy keeps only their names on disk.
    index.register_tokenizer(_KEY, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw()).build())
    index.register_tokenizer(_WORDS, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())


def _document(chunk: LexicalChunk, *, store_text: bool) -> tantivy.Document:
    document = tantivy.Document()
    document.add_text("chunk_id", chunk.chunk_id)
    document.add_text("doc_key", chunk.doc_key)
    document.add_text("domain", chunk.domain)
    document.add_unsigned("chunk_index", int(chunk.chunk_index))
    document.add_text("terms", " ".join(chunk.tokens))
    if store_text:
        document.add_bytes("text", chunk.text.encode())
    return document


def _tantivy_failure(exc: BaseException) -> bool:
    """An error raised by tantivy itself: ValueError / OSError, or a Rust panic (pyo3's
    PanicException derives from BaseException, so a bare ``except Exception`` misses it)."""
    return isinstance(exc, ValueError | OSError) or type(exc).__name__ == "PanicException"


class LexicalWrite:
    """One writer's changes, committed together when the ``writing`` block ends without error."""

    def __init__(self, writer: tantivy.IndexWriter, schema: tantivy.Schema, *, store_text: bool) -> None:
        self._writer = writer
        self._schema = schema
        self._store_text = store_text
        self.signature_written = False

    def replace(self, doc_key: str, chunks: Iterable[LexicalChunk]) -> int:
        """The document's entries become ``chunks``; returns how many were added."""
        self._writer.delete_documents_by_term("doc_key", doc_key)
        return self.add(chunks)

    def add(self, chunks: Iterable[LexicalChunk]) -> int:
        added = 0
        for chunk in chunks:
            self._writer.add_document(_document(chunk, store_text=self._store_text))
            added += 1
        return added

    def delete(self, doc_key: str) -> None:
        self._writer.delete_documents_by_term("doc_key", doc_key)

    def delete_chunks(self, chunk_ids: Iterable[str]) -> None:
        for chunk_id in chunk_ids:
            self._writer.delete_documents_by_term("chunk_id", chunk_id)

    def delete_all_except(self, doc_keys: Iterable[str]) -> None:
        """Everything but these documents' entries (tantivy applies a delete to what was added
        before it, so chunks added after this call stay)."""
        keep = sorted(set(doc_keys))
        query = tantivy.Query.all_query()
        if keep:
            query = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, query),
                    (tantivy.Occur.MustNot, tantivy.Query.term_set_query(self._schema, "doc_key", keep)),
                ]
            )
        self._writer.delete_documents_by_query(query)

    def mark_rebuilt(self) -> None:
        """Record the current analyser with this commit (a rebuild analysed every chunk again)."""
        self.signature_written = True


class TantivyLexicalIndex:
    """The tantivy index in ``path`` (see the module docstring). One per process."""

    name = "tantivy"
    separate = True

    def __init__(
        self,
        *,
        path: str | Path,
        heap_bytes: int = 50_000_000,
        lock_timeout: float = 300.0,
        store_text: bool = True,
    ) -> None:
        self.path = Path(path)
        self.heap_bytes = max(int(heap_bytes), MIN_HEAP_BYTES)
        self.lock_timeout = lock_timeout
        self.store_text = store_text
        self._index: tantivy.Index | None = None
        self._schema: tantivy.Schema | None = None
        self._loaded_meta: tuple | None = None
        self._lock = threading.RLock()

    # --- opening ---------------------------------------------------------------------------
    def exists(self) -> bool:
        return (self.path / "meta.json").exists()

    def _stored_meta(self) -> dict:
        try:
            return json.loads((self.path / META_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def _write_meta(self, *, signature: str) -> None:
        data = {"schema": SCHEMA_VERSION, "analyser": signature}
        temporary = self.path / f".{META_FILE}.tmp"
        temporary.write_text(json.dumps(data))
        os.replace(temporary, self.path / META_FILE)

    def _opened(self) -> tantivy.Index | None:
        """The index, opened once per process; None while nothing was ever written."""
        if self._index is None:
            with self._lock:
                if self._index is None:
                    if not self.exists():
                        return None
                    if self._stored_meta().get("schema") != SCHEMA_VERSION:
                        raise LexicalIndexError(
                            f"the lexical index in {self.path} was built with another schema; "
                            "run `python manage.py reindex --lexical-only`"
                        )
                    try:
                        index = tantivy.Index.open(str(self.path))
                    except BaseException as exc:
                        if not _tantivy_failure(exc):
                            raise
                        raise LexicalIndexError(
                            f"cannot open the lexical index in {self.path}: {exc}"
                        ) from exc
                    _register_tokenizers(index)
                    self._schema = index.schema
                    self._index = index
        return self._index

    def _created(self, *, fresh: bool = False) -> tantivy.Index:
        """Open the index for writing, creating it (under the writer lock) when missing or when
        ``fresh`` asks for an empty one (a rebuild after a schema change)."""
        if fresh or not self.exists() or self._stored_meta().get("schema") != SCHEMA_VERSION:
            self.close()
            if self.path.exists():
                for child in self.path.iterdir():
                    if child.name == LOCK_FILE:
                        continue
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
            self.path.mkdir(parents=True, exist_ok=True)
            index = tantivy.Index(_schema(), path=str(self.path), reuse=False)
            _register_tokenizers(index)
            self._write_meta(signature=analyser_signature())
            with self._lock:
                self._index, self._schema, self._loaded_meta = index, index.schema, None
        index = self._opened()
        assert index is not None
        return index

    def close(self) -> None:
        """Forget the opened index (tests; a rebuild from scratch)."""
        with self._lock:
            self._index = self._schema = self._loaded_meta = None

    # --- writing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _writer_lock(self) -> Iterator[None]:
        def busy() -> LexicalIndexError:
            return LexicalIndexError(f"the lexical index writer stayed busy for {self.lock_timeout:.0f} s")

        with file_lock(self.path / LOCK_FILE, timeout=self.lock_timeout, poll=0.02, busy=busy):
            yield

    @contextlib.contextmanager
    def writing(self, *, fresh: bool = False) -> Iterator[LexicalWrite]:
        """One writer, alone across processes: the block's changes are committed together at its
        end, or (an exception) not at all. ``fresh``: start from an empty index."""
        with self._writer_lock():
            try:
                index = self._created(fresh=fresh)
                writer = index.writer(heap_size=self.heap_bytes, num_threads=1)
            except BaseException as exc:
                if not _tantivy_failure(exc):
                    raise
                raise LexicalIndexError(f"cannot write the lexical index in {self.path}: {exc}") from exc
            session = LexicalWrite(writer, self._schema, store_text=self.store_text)
            try:
                try:
                    yield session
                    writer.commit()
                    # Merges run in the writer's threads: waited for here, or the segments of
                    # small commits would pile up (each search visits every segment).
                    writer.wait_merging_threads()
                except BaseException as exc:
                    with contextlib.suppress(BaseException):
                        writer.rollback()
                    if _tantivy_failure(exc):
                        raise LexicalIndexError(f"writing the lexical index failed: {exc}") from exc
                    raise
            finally:
                # Dropping the writer releases tantivy's own lock file for the next process.
                session._writer = None
                del writer
            if session.signature_written:
                self._write_meta(signature=analyser_signature())

    def documents_replace(self, chunks_by_doc: Mapping[str, Sequence[LexicalChunk]]) -> None:
        if not chunks_by_doc:
            return
        with self.writing() as write:
            for doc_key, chunks in chunks_by_doc.items():
                write.replace(doc_key, chunks)

    def documents_delete(self, doc_keys: Iterable[str]) -> None:
        keys = list(dict.fromkeys(doc_keys))
        if not keys or not self.exists():
            return
        with self.writing() as write:
            for doc_key in keys:
                write.delete(doc_key)

    # --- reading ---------------------------------------------------------------------------
    def _searcher(self) -> tantivy.Searcher | None:
        index = self._opened()
        if index is None:
            return None
        try:
            stat = os.stat(self.path / "meta.json")
            seen = (stat.st_mtime_ns, stat.st_ino, stat.st_size)
        except OSError:
            seen = None
        if seen != self._loaded_meta:
            with self._lock:
                for attempt in range(3):
                    try:
                        index.reload()
                        break
                    except BaseException as exc:
                        # A writer in another process may be replacing files right now.
                        if not _tantivy_failure(exc):
                            raise
                        if attempt == 2:
                            raise LexicalIndexError(f"cannot reload the lexical index: {exc}") from exc
                        time.sleep(0.05)
                self._loaded_meta = seen
        return index.searcher()

    def search(
        self,
        tokens: Sequence[str],
        *,
        top_k: int,
        domain: str | Iterable[str] | None = None,
        doc_keys: Iterable[str] | None = None,
    ) -> list[LexicalHit]:
        terms = list(dict.fromkeys(t for t in tokens if t))
        domains = _domains(domain)
        documents = None if doc_keys is None else sorted(set(doc_keys))
        if not terms or top_k <= 0 or domains == [] or documents == []:
            return []
        searcher = self._searcher()
        if searcher is None:
            return []
        schema = self._schema
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "terms", term)) for term in terms]
        )
        if domains is not None:
            # A filter, not a term: scored 0, so a hit's score is its BM25 score either way.
            only = tantivy.Query.const_score_query(
                tantivy.Query.term_set_query(schema, "domain", domains), 0.0
            )
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, only)])
        if documents is not None:  # a call's metadata condition: only these documents
            keep = tantivy.Query.const_score_query(
                tantivy.Query.term_set_query(schema, "doc_key", documents), 0.0
            )
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, keep)])
        try:
            result = searcher.search(query, limit=top_k, count=False)
            hits = []
            for score, address in result.hits:
                stored = searcher.doc(address)
                hits.append(
                    LexicalHit(
                        chunk_id=stored.get_first("chunk_id"),
                        doc_key=stored.get_first("doc_key"),
                        domain=stored.get_first("domain"),
                        chunk_index=int(stored.get_first("chunk_index")),
                        score=float(score),
                        text=(stored.get_first("text") or b"").decode(),
                    )
                )
        except BaseException as exc:
            if not _tantivy_failure(exc):
                raise
            raise LexicalIndexError(f"lexical search failed: {exc}") from exc
        return hits

    def _all(self, query_for, fields: Sequence[str]) -> list[tuple]:
        searcher = self._searcher()
        if searcher is None or searcher.num_docs == 0:
            return []
        query = query_for(self._schema)
        result = searcher.search(query, limit=max(searcher.num_docs, 1), count=False)
        rows = []
        for _score, address in result.hits:
            stored = searcher.doc(address)
            rows.append(tuple(stored.get_first(name) for name in fields))
        return rows

    def entries(self) -> list[LexicalEntry]:
        """Every entry (chunk id, doc key, domain): for ``check_index``."""
        rows = self._all(lambda _schema: tantivy.Query.all_query(), ("chunk_id", "doc_key", "domain"))
        return [LexicalEntry(*row) for row in rows]

    def chunk_ids(self, *, doc_key: str | None = None) -> set[str]:
        if doc_key is None:
            return {e.chunk_id for e in self.entries()}
        rows = self._all(lambda schema: tantivy.Query.term_query(schema, "doc_key", doc_key), ("chunk_id",))
        return {row[0] for row in rows}

    def count(self, *, doc_key: str | None = None) -> int:
        searcher = self._searcher()
        if searcher is None:
            return 0
        if doc_key is None:
            return int(searcher.num_docs)
        query = tantivy.Query.term_query(self._schema, "doc_key", doc_key)
        return int(searcher.search(query, limit=1, count=True).count or 0)

    def signature_problem(self) -> str:
        if not self.exists():
            return ""
        stored = self._stored_meta()
        if stored.get("schema") != SCHEMA_VERSION:
            return f"built with lexical schema {stored.get('schema')!r}, this code writes {SCHEMA_VERSION}"
        if stored.get("analyser") != analyser_signature():
            return f"built by analyser '{stored.get('analyser')}', this code analyses with '{analyser_signature()}'"
        return ""


def _domains(domain: str | Iterable[str] | None) -> list[str] | None:
    """None: no filter; a list (empty: nothing matches), as ``vectorstore.domain_filter``."""
    if domain is None:
        return None
    if isinstance(domain, str):
        return [domain] if domain else None
    return sorted(set(domain))
