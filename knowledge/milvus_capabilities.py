"""What the Milvus deployment in ``MILVUS_URI`` supports, detected once per process and logged.

The server's version decides it: milvus-lite 3.x (embedded or its server) has everything; a Milvus
server has sparse vectors and ``hybrid_search`` from 2.4 and the BM25 function from 2.5. A Milvus
2.3 server refuses a sparse index, silently drops the BM25 function, and aborts altogether when a
collection with a sparse field is loaded: the collection's schema therefore follows these
capabilities (``vectorstore.bm25_in_collection``), and ``schema_problem`` reports an existing
collection made for another capability set before anything loads it. The vector store asks the
server once per process (``VectorStore.capabilities``, logged) and consults this module.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

# the field Milvus's BM25 function writes (knowledge.vectorstore's schema; kept here, below it)
SPARSE_FIELD = "sparse"
MIGRATE_COMMAND = "python manage.py reindex --recreate"


@dataclass(frozen=True)
class MilvusCapabilities:
    server_version: str
    lite: bool
    sparse_vectors: bool
    bm25_function: bool
    hybrid_search: bool

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def summary(self) -> str:
        has = [name for name in ("sparse_vectors", "bm25_function", "hybrid_search") if getattr(self, name)]
        return f"{self.server_version}: {', '.join(has) if has else 'dense vectors only'}"


def _version_tuple(version: str) -> tuple[int, int]:
    match = re.search(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def is_lite_version(version: str) -> bool:
    """Whether a server's version string is milvus-lite's (``milvus_lite-3.2.2``). Milvus 2.3.5
    standalone from PyPI calls itself ``v2.3.5-lite`` and is no milvus-lite: the prefix decides."""
    return re.match(r"\s*milvus[_-]lite", version.lower()) is not None


def capabilities_for(version: str, *, embedded: bool = False) -> MilvusCapabilities:
    """The capabilities of a deployment reporting ``version`` (``embedded``: a milvus-lite file)."""
    if embedded or is_lite_version(version):
        return MilvusCapabilities(version or "milvus-lite (embedded)", True, True, True, True)
    at_least = _version_tuple(version)
    return MilvusCapabilities(
        server_version=version,
        lite=False,
        sparse_vectors=at_least >= (2, 4),
        bm25_function=at_least >= (2, 5),
        hybrid_search=at_least >= (2, 4),
    )


def schema_problem(
    description: dict[str, Any], caps: MilvusCapabilities, *, collection: str, bm25_wanted: bool
) -> str | None:
    """What is wrong with a collection (``description``: ``describe_collection``'s answer) for a
    server with ``caps`` whose lexical engine wants Milvus's BM25 in it (``bm25_wanted``), and the
    command that migrates it; None when it matches. The description alone is read: nothing loads
    the collection (loading a sparse field aborts a Milvus 2.3 server)."""
    names = {field["name"] for field in description.get("fields", [])}
    functions = [str(f.get("name")) for f in description.get("functions", []) or []]
    fix = f"Run `{MIGRATE_COMMAND}` to rebuild it from the stored chunks (every document is embedded again)."
    where = f"Milvus collection '{collection}'"
    if SPARSE_FIELD in names and not caps.sparse_vectors:
        return (
            f"{where} has a sparse field '{SPARSE_FIELD}', which Milvus {caps.server_version} "
            f"cannot load (it has no sparse vectors; loading it aborts the server). {fix}"
        )
    if functions and not caps.bm25_function:
        return (
            f"{where} has the BM25 function {', '.join(functions)}, which Milvus "
            f"{caps.server_version} does not have. {fix}"
        )
    if bm25_wanted and (SPARSE_FIELD not in names or not functions):
        return (
            f"{where} has no BM25 field and function, but Milvus's own BM25 is the lexical engine "
            f"on {caps.server_version}. {fix}"
        )
    return None
