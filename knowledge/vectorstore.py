"""The one wrapper over Milvus (pymilvus ``MilvusClient``).

``MILVUS_URI`` is a local file path (embedded milvus-lite, one process only), or an http(s)
URI: a ``milvus-lite server`` on loopback, Milvus standalone or a cluster.

One row per chunk: chunk_id (VARCHAR primary key, ``<doc_key>#<index>``), vector (FLOAT_VECTOR,
metric L2), text (the text the vector embeds: title, heading path, chunk; analysed by jieba),
sparse (SPARSE_FLOAT_VECTOR written by Milvus's own BM25 function over ``text``, metric BM25),
domain, doc_key, chunk_index. Everything else is read from the database.

``hybrid_search`` runs the dense and the BM25 request as one Milvus ``hybrid_search`` fused by
RRF (or a weighted ranker); ``bm25_search`` runs the BM25 request alone (the lexical engine
``milvus``, ``knowledge.lexical``). A fused score is no distance, so every hit also carries its raw
squared L2 distance, computed here from the returned vector (exactly what a dense search returns).
A collection built before the text/BM25 fields existed is reported by ``lexical_fields_missing``.
A Milvus server without the BM25 function (before 2.5: ``supports_bm25``) gets a collection with
the text but without the sparse field and function; its lexical side is the tantivy index.

Metric L2 in Milvus returns the SQUARED Euclidean distance. For unit vectors that is 2 - 2cos,
so the seeds' normalisation ``1 - min(d, 2) / 2`` turns it into the cosine similarity.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from config.credentials import mask_credentials
from knowledge import milvus_index
from knowledge.milvus_capabilities import (
    SPARSE_FIELD,
    MilvusCapabilities,
    capabilities_for,
    is_lite_version,
    schema_problem,
)
from knowledge.milvus_columns import columns_upsert
from knowledge.vector_deadlines import CallGuard, timed_out

logger = logging.getLogger(__name__)

_PROP_MODEL = "agentkb.embedding_model"
TEXT_FIELD = "text"
BM25_FUNCTION = "text_bm25"
# VARCHAR max_length counts bytes: a chunk's text is cut to this many characters before it is
# stored (4 bytes per character at worst), far above CHUNK_TARGET_CHARS.
TEXT_MAX_BYTES = 65535
TEXT_MAX_CHARS = TEXT_MAX_BYTES // 4
# jieba (milvus-lite[chinese]; Milvus 2.5+ ships it). Punctuation is no term: dropped before BM25
# counts it, so it neither matches nor lengthens a document.
PUNCTUATION = list("，。、；：？！「」『』（）【】《》〈〉“”‘’…—·,.;:?!()[]{}<>\"'`~@#$%^&*-_=+|/")
ANALYZER_PARAMS = {"tokenizer": "jieba", "filter": [{"type": "stop", "stop_words": PUNCTUATION}]}
RANKERS = ("rrf", "weighted")
_PROP_DIM = "agentkb.dim"
_DELETE_BATCH = 500
# Rows per upsert call: keeps one request well under gRPC's message limit at 1024-d.
_UPSERT_BATCH = 500
#: How long a store trusts its last check that the collection exists and fits the model.
ENSURED_FOR_S = 60.0
# Counts, id lists, entries and stored vectors (repairs, check_index, tests) see every write
# before them: a Milvus server's default (Bounded) answers from a view up to seconds old, missing
# a delete or an unflushed write just made. Searches read their own process's writes (Session:
# ``_read_your_writes``).
_READ_YOUR_WRITES = "Strong"


class VectorStoreError(Exception):
    """The vector store is unreachable or refused an operation.

    The message names the URI, with its password masked: it reaches logs, /healthz, recorded
    invocations and the admin."""

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(mask_credentials(str(message)), *args)


class VectorStoreMismatch(VectorStoreError):
    """The collection was built with another embedding model or dimension."""


@dataclass(frozen=True)
class ChunkVector:
    chunk_id: str
    vector: list[float]
    domain: str
    doc_key: str
    chunk_index: int
    #: what the vector embeds; BM25 indexes it (empty only for rows written by older code)
    text: str = ""


@dataclass(frozen=True)
class VectorEntry:
    chunk_id: str
    doc_key: str
    domain: str
    chunk_index: int


@dataclass(frozen=True)
class VectorHit:
    chunk_id: str
    doc_key: str
    domain: str
    chunk_index: int
    #: the raw squared L2 distance as Milvus returns it: lower is closer (FS-1 normalises it)
    l2_distance: float
    #: the chunk's stored text (hybrid search only)
    text: str = ""
    #: the chunk's BM25 score when hybrid search's lexical side found it (level evidence)
    lexical_score: float | None = None


def _connection_lost(exc: Exception) -> bool:
    """Whether a failure looks like the server going away (as opposed to a refused request)."""
    text = str(exc).lower()
    return any(
        marker in text
        for marker in ("cannot connect", "fail connecting", "unavailable", "connection", "deadline")
    )


def _quote(value: str) -> str:
    """A Milvus boolean-expression string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def domain_filter(domain: str | Iterable[str] | None, doc_keys: Iterable[str] | None = None) -> str:
    """The Milvus filter for one domain, a set of domains (an agent's scope), or none (""); and,
    when ``doc_keys`` is given, only those documents (a call's metadata condition: an empty set
    matches nothing)."""
    if domain is None:
        expr = ""
    elif isinstance(domain, str):
        expr = f"domain == {_quote(domain)}" if domain else ""
    else:
        names = sorted(domain)
        # An empty scope is "no domain": the filter matches nothing rather than everything.
        expr = f"domain in [{', '.join(_quote(name) for name in names)}]" if names else 'domain == ""'
    if doc_keys is None:
        return expr
    keys = sorted(doc_keys)
    only = f"doc_key in [{', '.join(_quote(key) for key in keys)}]" if keys else 'doc_key == ""'
    return f"({expr}) and ({only})" if expr else only


class VectorStore:
    def __init__(
        self,
        *,
        uri: str,
        token: str = "",
        collection: str,
        index_type: str = "AUTOINDEX",
        index_params: dict[str, Any] | None = None,
        search_params: dict[str, Any] | None = None,
        timeout: float = 10.0,
        read_timeout: float = 2.0,
        breaker_seconds: float = 5.0,
        flush_after_write: bool | None = None,
    ) -> None:
        self.uri = uri
        #: None: flush on milvus-lite only (``flushes_after_write``)
        self.flush_after_write = flush_after_write
        self.token = token
        self.collection = collection
        self.index_type = index_type
        #: over knowledge.milvus_index's defaults for the index type
        self.index_params = dict(index_params or {})
        self.search_params = dict(search_params or {})
        self.timeout = timeout
        self.guard = CallGuard(
            f"Milvus at {mask_credentials(uri)}",
            timeout=timeout,
            read_timeout=read_timeout,
            cooldown=breaker_seconds,
        )
        self._client = None
        self._lock = threading.Lock()
        self._loaded = False
        self._version: str | None = None
        self._capabilities: MilvusCapabilities | None = None
        # (dim, model) this process last found the collection built for, and when (monotonic)
        self._ensured: tuple[tuple[int, str], float] | None = None

    # --- connection ------------------------------------------------------------------------
    @property
    def is_embedded(self) -> bool:
        return not self.uri.startswith(("http://", "https://", "tcp://", "grpc://"))

    def client(self, connect_timeout: float | None = None):
        """The pymilvus client, connected on first use within ``connect_timeout`` (default
        MILVUS_TIMEOUT): a lookup's read that reconnects after a restart passes its own short
        deadline, so a server that hangs just then cannot hold it for the whole MILVUS_TIMEOUT."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    from pymilvus import MilvusClient

                    if self.is_embedded:
                        Path(self.uri).parent.mkdir(parents=True, exist_ok=True)
                    try:
                        # dedicated: pymilvus otherwise shares one channel per URI between clients
                        # and keeps it after close(), so a reset could never replace a dead one.
                        kwargs: dict[str, Any] = {"uri": self.uri, "timeout": connect_timeout or self.timeout}
                        if not self.is_embedded:
                            kwargs["dedicated"] = True
                        if self.token:
                            kwargs["token"] = self.token
                        self._client = MilvusClient(**kwargs)
                    except Exception as exc:
                        raise VectorStoreError(f"cannot connect to Milvus at {self.uri}: {exc}") from exc
        return self._client

    def reset(self) -> None:
        """Drop the connection (after a server restart, or between tests)."""
        with self._lock:
            if self._client is not None:
                try:
                    self._client.close()
                except Exception:  # closing a dead connection may raise; nothing to do about it
                    logger.debug("closing Milvus client failed", exc_info=True)
            self._client = None
            self._loaded = False
            self._version = None
            self._capabilities = None
            self._ensured = None

    def _call(self, fn_name: str, *args, **kwargs):
        """Call a client method within its deadline, unless the breaker is open (a call failed
        for want of an answer moments ago): see ``knowledge.vector_deadlines``."""
        probe = kwargs.pop("_probe", False)
        kwargs.setdefault("timeout", self.guard.deadline(fn_name))
        return self.guard.run(
            fn_name,
            lambda: self._call_reconnecting(fn_name, *args, **kwargs),
            refused=lambda reason: VectorStoreError(f"Milvus {fn_name} not attempted: {reason}"),
            lost=lambda exc: _connection_lost(exc) or timed_out(exc),
            probe=probe,
        )

    def _call_reconnecting(self, fn_name: str, *args, **kwargs):
        """Reload the collection once if a restarted server released it, and connect afresh
        once if the connection broke (not when it timed out: a hung server would hang again)."""
        try:
            return self._call_once(fn_name, *args, **kwargs)
        except VectorStoreError as exc:
            if not _connection_lost(exc) or timed_out(exc):
                raise
            if self.guard.breaker.is_open:
                # Another call of this process found the server not answering meanwhile (and its
                # reset closed the channel this call was on): a new connection would only wait on
                # it again (a hung Milvus held such lookups a connect and a call, 4-5 s).
                raise
        # pymilvus keeps a channel that saw its server go away failing even after the server is
        # back ("Fail connecting to server"): drop it and try once on a new connection, so a
        # restarted Milvus is used again without restarting this process.
        self.reset()
        return self._call_once(fn_name, *args, **kwargs)

    def _call_once(self, fn_name: str, *args, **kwargs):
        try:
            return self._method(fn_name, kwargs.get("timeout"))(*args, **kwargs)
        except VectorStoreError:
            raise
        except Exception as exc:
            # Released by a restarted server, or being loaded by a concurrent call of this
            # process (the fused search asks twice at once): load (waits for it) and retry once.
            text = str(exc).lower()
            if "released" in text or "not loaded" in text or "state 'loading'" in text:
                try:
                    # Within the call's own deadline: a lookup's search must not wait out a whole
                    # MILVUS_TIMEOUT for a load (a server that hangs mid-load held lookups 12 s);
                    # a load that takes longer goes on in the server, and a later call finds it
                    # loaded.
                    deadline = kwargs.get("timeout") or self.timeout
                    self.client().load_collection(self.collection, timeout=deadline)
                    return self._method(fn_name)(*args, **kwargs)
                except Exception as again:
                    raise VectorStoreError(f"Milvus {fn_name} failed: {again}") from again
            raise VectorStoreError(f"Milvus {fn_name} failed: {exc}") from exc

    def _method(self, fn_name: str, connect_timeout: float | None = None):
        """The client's method ``fn_name``, or this module's own way of making that call
        (``_OWN_CALLS``)."""
        client = self.client(connect_timeout)
        own = _OWN_CALLS.get(fn_name)
        return functools.partial(own, client) if own is not None else getattr(client, fn_name)

    def ping(self) -> None:
        """Raise VectorStoreError when Milvus does not answer. Asks even while the breaker is
        open (``CallGuard.run``'s probe): /healthz must see a server that came back."""
        self._call("list_collections", _probe=True)

    def server_version(self) -> str:
        """What the server says it is: ``milvus_lite-3.2.2`` for milvus-lite (embedded or its
        server), ``v2.5.4``-like for Milvus. Asked once per store."""
        if self._version is None:
            self._version = str(self._call("get_server_version"))
        return self._version

    @property
    def is_lite(self) -> bool:
        """milvus-lite, embedded or as a ``milvus-lite server`` (asks a server once)."""
        return self.is_embedded or is_lite_version(self.server_version())

    def supports_bm25(self) -> bool:
        """Whether the store has Milvus's BM25 function (milvus-lite 3.x, Milvus >= 2.5)."""
        return self.capabilities().bm25_function

    def capabilities(self) -> MilvusCapabilities:
        """What this deployment supports (version, sparse vectors, BM25, hybrid_search): asked
        once per store (so once per process) and logged."""
        if self._capabilities is None:
            version = "milvus-lite (embedded)" if self.is_embedded else self.server_version()
            found = capabilities_for(version, embedded=self.is_embedded)
            logger.info("Milvus capabilities of %s: %s", mask_credentials(self.uri), found.summary())
            self._capabilities = found
        return self._capabilities

    def schema_problem(self) -> str | None:
        """What is wrong with the existing collection for this server and lexical engine, and how
        to migrate it (None: it matches or does not exist). Never loads the collection."""
        if not self.exists():
            return None
        return schema_problem(
            self.describe(),
            self.capabilities(),
            collection=self.collection,
            bm25_wanted=self.bm25_in_collection(),
        )

    def bm25_in_collection(self) -> bool:
        """Whether this store's collection carries Milvus's BM25 field: when Milvus's own BM25 is
        the lexical engine (``lexical_engine_name``)."""
        setting = str(settings.LEXICAL_ENGINE).strip().lower()
        # Never a field the server cannot load (forcing milvus there is refused at start).
        return self.supports_bm25() and lexical_engine_name(setting, self) == "milvus"

    # --- collection ------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.collection in self._call("list_collections")

    def describe(self) -> dict[str, Any]:
        """The collection's description (schema, functions, properties); never loads it."""
        return self._call("describe_collection", self.collection)

    def describe_embedding(self) -> tuple[str | None, int | None]:
        """The embedding model and dimension the collection was built with."""
        info = self._call("describe_collection", self.collection)
        props = info.get("properties") or {}
        dim = None
        for field in info.get("fields", []):
            if field["name"] == "vector":
                dim = int(field["params"]["dim"])
        return props.get(_PROP_MODEL), dim

    def lexical_fields_missing(self) -> list[str]:
        """The fields hybrid search needs that an existing collection lacks (built before hybrid
        search): the text always; the BM25 field and function when Milvus's BM25 is the lexical
        engine (``bm25_in_collection``)."""
        info = self._call("describe_collection", self.collection)
        names = {field["name"] for field in info.get("fields", [])}
        if not self.bm25_in_collection():
            return [TEXT_FIELD] if TEXT_FIELD not in names else []
        functions = {f.get("name") for f in info.get("functions", []) or []}
        missing = [name for name in (TEXT_FIELD, SPARSE_FIELD) if name not in names]
        if not missing and not functions:
            missing.append(f"BM25 function '{BM25_FUNCTION}'")
        return missing

    def ensure_collection(self, *, dim: int, model_name: str) -> None:
        """Create the collection if missing; refuse one built for another model or dimension.

        Checked at most every ENSURED_FOR_S per store for the same model: the check is four
        round trips (about 50 ms on milvus-lite), and a bulk ingest asks before every batch
        (200 µs a chunk). A collection dropped or rebuilt meanwhile by another process fails the
        next write, which is retried; ``drop`` and ``reset`` here forget the check at once."""
        ensured = self._ensured
        if ensured and ensured[0] == (dim, model_name) and time.monotonic() - ensured[1] < ENSURED_FOR_S:
            return
        self._ensure_collection(dim=dim, model_name=model_name)
        self._ensured = ((dim, model_name), time.monotonic())

    def _ensure_collection(self, *, dim: int, model_name: str) -> None:
        if self.exists():
            existing_model, existing_dim = self.describe_embedding()
            if existing_dim != dim or (existing_model and existing_model != model_name):
                raise VectorStoreMismatch(
                    f"Milvus collection '{self.collection}' holds {existing_dim}-d vectors from "
                    f"'{existing_model}', but the configured embedding is {dim}-d '{model_name}'. "
                    "Run `.venv/bin/python manage.py reindex --recreate` to rebuild it with the new model."
                )
            if missing := self.lexical_fields_missing():
                raise VectorStoreMismatch(lexical_fields_message(self.collection, missing))
            # Before loading: a field the server cannot load would abort it (Milvus 2.3).
            if problem := self.schema_problem():
                raise VectorStoreMismatch(problem)
            self._ensure_loaded()
            return
        from pymilvus import DataType, Function, FunctionType, MilvusClient

        # BM25 in the collection only when it is the lexical engine: otherwise the text is kept for
        # the hits, unanalysed (milvus-lite would analyse it in Python at every insert for nothing,
        # and a sparse field aborts a Milvus before 2.5 when the collection is loaded).
        bm25 = self.bm25_in_collection()
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=512)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        analysed = {"enable_analyzer": True, "analyzer_params": ANALYZER_PARAMS} if bm25 else {}
        schema.add_field(TEXT_FIELD, DataType.VARCHAR, max_length=TEXT_MAX_BYTES, **analysed)
        if bm25:
            schema.add_field(SPARSE_FIELD, DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("domain", DataType.VARCHAR, max_length=64)
        schema.add_field("doc_key", DataType.VARCHAR, max_length=255)
        schema.add_field("chunk_index", DataType.INT64)
        if bm25:
            schema.add_function(
                Function(
                    name=BM25_FUNCTION,
                    function_type=FunctionType.BM25,
                    input_field_names=[TEXT_FIELD],
                    output_field_names=[SPARSE_FIELD],
                )
            )
        index_params = self.client().prepare_index_params()
        index_params.add_index(
            field_name="vector",
            index_type=self.index_type,
            metric_type="L2",
            params=milvus_index.index_params(self.index_type, self.index_params),
        )
        if bm25:
            index_params.add_index(
                field_name=SPARSE_FIELD, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25"
            )
        # The indexes are created unsynced, then the collection loaded: pymilvus's synced create
        # polls every index with a 0.5 s sleep first (a second per collection) and asks for a
        # timestamp milvus-lite does not implement (an ERROR traceback in its log). An empty
        # collection's indexes are ready at once, and loading waits for them on a Milvus server.
        self._call("create_collection", self.collection, schema=schema)
        self._call("create_index", self.collection, index_params, sync=False)
        self._call("load_collection", self.collection)
        self._call(
            "alter_collection_properties",
            self.collection,
            properties={_PROP_MODEL: model_name, _PROP_DIM: str(dim)},
        )
        self._loaded = True

    def _ensure_loaded(self, *, for_read: bool = False) -> None:
        """Load the collection once per connection. A lookup's read (``for_read``) waits for the
        load at most its read deadline: after Milvus restarts, each process reloads on its next
        call, and a server that hangs just then must not hold a lookup for MILVUS_TIMEOUT."""
        if not self._loaded:
            options = {"timeout": self.guard.read_timeout} if for_read else {}
            self._call("load_collection", self.collection, **options)
            self._loaded = True

    def drop(self) -> None:
        if self.exists():
            self._call("drop_collection", self.collection)
        self._loaded = False
        self._ensured = None

    # --- rows ------------------------------------------------------------------------------
    @property
    def flushes_after_write(self) -> bool:
        """Whether a write ends with a flush (MILVUS_FLUSH_AFTER_WRITE, ``auto`` by default:
        milvus-lite only). milvus-lite 3.x searches rows that were never flushed with a slow scan
        (about 5 s per search at 100,000 rows: bench/lookup.py --unflushed) and flushes in ~10 ms.
        A Milvus server searches unflushed rows as fast, seals segments itself, and spends about
        3 s on a flush (Milvus 2.3.5: a bulk ingest's pipeline took 17.8 ms a chunk with a flush
        per batch, 2.4 ms without, bench/ingest.py --embedder null)."""
        if self.flush_after_write is None:
            return self.is_lite
        return self.flush_after_write

    def _read_your_writes(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A search's options on a Milvus server: Session consistency, so a process searches what
        it has just written (unflushed rows included); other processes see it within Milvus's
        bounded staleness, as before. milvus-lite answers from what it holds."""
        if not self.is_lite:
            kwargs["consistency_level"] = "Session"
        return kwargs

    def upsert(self, rows: list[ChunkVector]) -> None:
        for start in range(0, len(rows), _UPSERT_BATCH):
            self._upsert_batch(rows[start : start + _UPSERT_BATCH])
        if rows and self.flushes_after_write:
            self._call("flush", self.collection)

    def _upsert_batch(self, rows: list[ChunkVector]) -> None:
        if not rows:
            return
        from pymilvus import DataType

        columns = {
            "chunk_id": (DataType.VARCHAR, [r.chunk_id for r in rows]),
            "vector": (DataType.FLOAT_VECTOR, [_floats(r.vector) for r in rows]),
            "domain": (DataType.VARCHAR, [r.domain for r in rows]),
            "doc_key": (DataType.VARCHAR, [r.doc_key for r in rows]),
            "chunk_index": (DataType.INT64, [int(r.chunk_index) for r in rows]),
            TEXT_FIELD: (DataType.VARCHAR, [r.text[:TEXT_MAX_CHARS] for r in rows]),
        }
        self._call("upsert", self.collection, columns)

    def delete_chunks(self, chunk_ids: list[str]) -> None:
        for start in range(0, len(chunk_ids), _DELETE_BATCH):
            batch = chunk_ids[start : start + _DELETE_BATCH]
            self._call("delete", self.collection, ids=batch)

    def delete_document(self, doc_key: str) -> None:
        if not self.exists():  # nothing was ever indexed: nothing to delete
            return
        self._call("delete", self.collection, filter=f"doc_key == {_quote(doc_key)}")

    def chunk_ids(self, *, doc_key: str | None = None) -> set[str]:
        """Every stored chunk id (optionally of one document): for repairs and tests."""
        expr = f"doc_key == {_quote(doc_key)}" if doc_key is not None else 'chunk_id != ""'
        ids: set[str] = set()
        offset, page = 0, 1000
        while True:
            rows = self._call(
                "query",
                self.collection,
                filter=expr,
                output_fields=["chunk_id"],
                limit=page,
                offset=offset,
                consistency_level=_READ_YOUR_WRITES,
            )
            ids.update(r["chunk_id"] for r in rows)
            if len(rows) < page:
                return ids
            offset += page

    def entries(self, *, batch_size: int = 1000) -> list[VectorEntry]:
        """Every stored row without its vector (chunk id, doc key, domain, index): for
        ``check_index``. An iterator, because Milvus refuses offset + limit above 16,384."""
        if not self.exists():
            return []
        if not self.flushes_after_write:
            # A server's query iterator reads from a timestamp it sets itself (Milvus 2.3 ignores
            # the consistency asked for), missing writes not yet flushed: flush them first (one
            # flush a check, ~3 s on Milvus 2.3.5, instead of one per write).
            self._call("flush", self.collection)
        fields = ["chunk_id", "doc_key", "domain", "chunk_index"]
        iterator = self._call(
            "query_iterator",
            self.collection,
            batch_size=batch_size,
            filter='chunk_id != ""',
            output_fields=fields,
            consistency_level=_READ_YOUR_WRITES,
        )
        found: list[VectorEntry] = []
        try:
            while True:
                try:
                    rows = iterator.next()
                except Exception as exc:
                    raise VectorStoreError(f"Milvus query_iterator failed: {exc}") from exc
                if not rows:
                    return found
                found.extend(
                    VectorEntry(r["chunk_id"], r["doc_key"], r["domain"], int(r["chunk_index"])) for r in rows
                )
        finally:
            iterator.close()

    def vectors(self, chunk_ids: list[str], *, for_read: bool = False) -> dict[str, list[float]]:
        """The stored vectors of these chunks (missing ids are absent): for checks and repairs,
        and for a lookup's chunks only BM25 found (``for_read``: within the read deadline, as the
        lookup's search; a hung Milvus held such a lookup for the whole MILVUS_TIMEOUT)."""
        # A lookup's read keeps the default view; checks and repairs see every write before them.
        options = (
            {"timeout": self.guard.read_timeout} if for_read else {"consistency_level": _READ_YOUR_WRITES}
        )
        found: dict[str, list[float]] = {}
        for start in range(0, len(chunk_ids), _DELETE_BATCH):
            rows = self._call(
                "get",
                self.collection,
                ids=chunk_ids[start : start + _DELETE_BATCH],
                output_fields=["vector"],
                **options,
            )
            found.update({r["chunk_id"]: [float(x) for x in r["vector"]] for r in rows})
        return found

    def count(self, *, doc_key: str | None = None) -> int:
        if not self.exists():
            return 0
        expr = f"doc_key == {_quote(doc_key)}" if doc_key is not None else 'chunk_id != ""'
        rows = self._call(
            "query",
            self.collection,
            filter=expr,
            output_fields=["count(*)"],
            consistency_level=_READ_YOUR_WRITES,
        )
        return int(rows[0]["count(*)"]) if rows else 0

    @property
    def filter_share_matters(self) -> bool:
        """Whether a filtered search reaches further when told the filter's share of the rows
        (``milvus_index.filter_widens``: an IVF index, or milvus-lite's graph index)."""
        return milvus_index.filter_widens(self.index_type, lite=self.is_lite)

    def _dense_search_params(self, top_k: int, filter_share: float | None = None) -> dict[str, Any]:
        """What a search of the vector field sends: L2, and the index type's parameters (widened
        for a filter keeping ``filter_share`` of the rows where the index needs it)."""
        params = milvus_index.search_params(self.index_type, self.search_params, top_k=top_k)
        if filter_share is not None:  # left as configured where the index needs no widening
            params = milvus_index.filtered_search_params(
                self.index_type,
                params,
                top_k=top_k,
                filter_share=filter_share,
                lite=self.is_lite,
                index=self.index_params,
            )
        return {"metric_type": "L2", "params": params}

    def search(
        self,
        vector: list[float],
        *,
        top_k: int,
        domain: str | Iterable[str] | None = None,
        with_text: bool = False,
        doc_keys: Iterable[str] | None = None,
        filter_share: float | None = None,
    ) -> list[VectorHit]:
        """Nearest chunks by squared L2 distance, closest first (of ``domain``: one, or a set; of
        ``doc_keys`` only, when given); ``with_text``: each hit carries its stored text (what
        lexical evidence reads). ``filter_share``: the share of the collection's rows that domain
        and those documents hold, when the caller knows it: milvus-lite's graph index then walks,
        and an IVF index scans, far enough to find them (``milvus_index.filtered_search_params``)."""
        self._ensure_loaded(for_read=True)
        expr = domain_filter(domain, doc_keys)
        kwargs: dict[str, Any] = {
            "data": [[float(x) for x in vector]],
            "limit": top_k,
            "output_fields": ["doc_key", "domain", "chunk_index", *([TEXT_FIELD] if with_text else [])],
            "search_params": self._dense_search_params(top_k, filter_share if expr else None),
        }
        if expr:
            kwargs["filter"] = expr
        result = self._call("search", self.collection, **self._read_your_writes(kwargs))
        hits = []
        for hit in result[0] if result else []:
            entity = hit.get("entity", {})
            hits.append(
                VectorHit(
                    chunk_id=hit.get("chunk_id") or hit.get("id"),
                    doc_key=entity["doc_key"],
                    domain=entity["domain"],
                    chunk_index=int(entity["chunk_index"]),
                    l2_distance=float(hit["distance"]),
                    text=entity.get(TEXT_FIELD) or "",
                )
            )
        return hits

    def bm25_search(
        self,
        text: str,
        *,
        top_k: int,
        domain: str | Iterable[str] | None = None,
        doc_keys: Iterable[str] | None = None,
    ) -> list[tuple[VectorHit, float]]:
        """Milvus's BM25 alone on ``text``: (hit, BM25 score) pairs, best first; each hit's
        ``score`` is NaN (no vector was compared) and it carries its text. The BM25 score is
        positive, larger is better (milvus-lite 3.2.2 reports it negated, as a distance)."""
        self._ensure_loaded(for_read=True)
        kwargs: dict[str, Any] = {
            "data": [text],
            "anns_field": SPARSE_FIELD,
            "limit": top_k,
            "output_fields": ["doc_key", "domain", "chunk_index", TEXT_FIELD],
            "search_params": {"metric_type": "BM25"},
        }
        if expr := domain_filter(domain, doc_keys):
            kwargs["filter"] = expr
        result = self._call("search", self.collection, **self._read_your_writes(kwargs))
        found = []
        for hit in result[0] if result else []:
            entity = hit.get("entity", {})
            found.append(
                (
                    VectorHit(
                        chunk_id=hit.get("chunk_id") or hit.get("id"),
                        doc_key=entity["doc_key"],
                        domain=entity["domain"],
                        chunk_index=int(entity["chunk_index"]),
                        l2_distance=float("nan"),
                        text=entity.get(TEXT_FIELD) or "",
                    ),
                    abs(float(hit["distance"])),
                )
            )
        return found

    def hybrid_search(
        self,
        vector: list[float],
        text: str,
        *,
        top_k: int,
        domain: str | Iterable[str] | None = None,
        ranker: str = "rrf",
        rrf_k: int = 60,
        dense_weight: float = 0.5,
    ) -> list[VectorHit]:
        """One Milvus hybrid search over the dense vector and BM25 on ``text``, best fused first.

        Each hit's ``l2_distance`` is its raw squared L2 distance to ``vector`` (computed from the
        stored vector, as a dense search would return it), whatever the fused rank."""
        from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

        if ranker not in RANKERS:
            raise ValueError(f"ranker must be one of {', '.join(RANKERS)}; got {ranker!r}")
        self._ensure_loaded(for_read=True)
        query = [float(x) for x in vector]
        expr = domain_filter(domain)
        requests = [
            AnnSearchRequest(
                data=[query],
                anns_field="vector",
                param=self._dense_search_params(top_k),
                limit=top_k,
                expr=expr,
            ),
            AnnSearchRequest(
                data=[text], anns_field=SPARSE_FIELD, param={"metric_type": "BM25"}, limit=top_k, expr=expr
            ),
        ]
        fusion = RRFRanker(rrf_k) if ranker == "rrf" else WeightedRanker(dense_weight, 1.0 - dense_weight)
        result = self._call(
            "hybrid_search",
            self.collection,
            requests,
            ranker=fusion,
            limit=top_k,
            output_fields=["doc_key", "domain", "chunk_index", "vector", TEXT_FIELD],
        )
        rows = list(result[0]) if result else []
        if not rows:
            return []
        q = np.asarray(query, dtype=np.float32)
        stored = np.asarray([row["entity"]["vector"] for row in rows], dtype=np.float32)
        distances = ((stored - q) ** 2).sum(axis=1)
        return [
            VectorHit(
                chunk_id=row.get("chunk_id") or row.get("id"),
                doc_key=row["entity"]["doc_key"],
                domain=row["entity"]["domain"],
                chunk_index=int(row["entity"]["chunk_index"]),
                l2_distance=float(distance),
                text=row["entity"].get(TEXT_FIELD) or "",
            )
            for row, distance in zip(rows, distances, strict=True)
        ]


def lexical_engine_name(setting: str, store: VectorStore) -> str:
    """ "tantivy" or "milvus": where BM25 lives for ``LEXICAL_ENGINE`` ``setting`` on ``store``.
    ``auto``: tantivy on milvus-lite (embedded or its server: it scores BM25 in a Python loop)
    and on a Milvus without the BM25 function; Milvus's own BM25 on a Milvus >= 2.5 server. Why,
    and the refusal of ``milvus`` where it cannot run: ``knowledge.lexical.choice``."""
    if setting in ("tantivy", "milvus"):
        return setting
    if store.is_embedded:
        return "tantivy"
    version = store.server_version()
    return "milvus" if not is_lite_version(version) and bm25_supported(version) else "tantivy"


def bm25_supported(version: str) -> bool:
    """Whether a server reporting ``version`` has the BM25 function: milvus-lite 3.x, Milvus 2.5+."""
    if is_lite_version(version):
        return True
    match = re.search(r"(\d+)\.(\d+)", version)
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= (2, 5)


def lexical_fields_message(collection: str, missing: list[str]) -> str:
    return (
        f"Milvus collection '{collection}' was built before hybrid search and lacks "
        f"{', '.join(missing)}. Run `.venv/bin/python manage.py reindex --recreate` to rebuild it "
        "with them (every document is then indexed again)."
    )


_store: VectorStore | None = None
_store_lock = threading.Lock()


def get_vector_store() -> VectorStore:
    """The process-wide vector store, configured from settings."""
    global _store
    if _store is None:
        with _store_lock:
            if _store is None:
                _store = VectorStore(
                    uri=settings.MILVUS_URI,
                    token=settings.MILVUS_TOKEN,
                    collection=settings.MILVUS_COLLECTION,
                    index_type=settings.MILVUS_INDEX_TYPE,
                    index_params=settings.MILVUS_INDEX_PARAMS,
                    search_params=settings.MILVUS_SEARCH_PARAMS,
                    timeout=settings.MILVUS_TIMEOUT,
                    read_timeout=settings.MILVUS_READ_TIMEOUT,
                    breaker_seconds=settings.DEPENDENCY_BREAKER_SECONDS,
                    flush_after_write=settings.MILVUS_FLUSH_AFTER_WRITE,
                )
    return _store


def _floats(vector) -> list[float]:
    """A vector as the list of Python floats pymilvus sends. The pipeline's rows already are
    (``ndarray.tolist()``): converting 512 floats again cost about 60 µs a chunk."""
    if type(vector) is list and (not vector or type(vector[0]) is float):
        return vector
    return [float(x) for x in vector]


#: calls made another way than through the client's method of that name: the upsert goes as
#: columns (``knowledge.milvus_columns``: pymilvus's row path costs about five times as much)
_OWN_CALLS = {"upsert": columns_upsert}


def reset_vector_store() -> None:
    """Forget the process-wide store (settings changed, or a test wants a fresh one)."""
    global _store
    with _store_lock:
        if _store is not None:
            _store.reset()
        _store = None
