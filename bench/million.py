"""A million chunks on Milvus 2.3.5 standalone with the embedded lexical engine (tantivy).

One throw-away agentkb in a temporary folder (SQLite, Milvus 2.3.5 standalone from the
``milvus-server`` extra on loopback ports of its own, tantivy in the var folder, ``gunicorn
config.wsgi`` with one sync worker, an idle Celery worker), loaded with ``--size`` chunks, then, for
the same questions in the same run:

- raw dense: embed the question (the USE default, a real embedding) + ``VectorStore.search``;
- the endpoint: ``POST /api/tools/lookup_knowledge`` with a fresh session (hybrid: dense in Milvus,
  BM25 in tantivy, fused), recorded as any call;
- recall@10 of the Milvus index against exact (FLAT) search, computed here with numpy over the
  same vectors, on 200 questions.

Printed: build times (database rows, vectors inserted, flush + index, load, lexical index), the
index type and its size on disk, the lexical index's size, and the resident memory of the web
worker, the Celery worker and Milvus.

Text is real text: chunks of about 136 characters drawn from the sentences of the CMRC 2018 trial
split and DRCD dev (``bench/lexical.py``: read where they lie, never copied), the questions are
those data sets' questions. **Vectors are filler**: seeded random unit vectors (embedding a million
chunks with the CPU model would take hours here). Random vectors are the worst case for an
approximate index (no clusters, no neighbourhoods): its recall on real embeddings is higher.

    .venv/bin/python bench/million.py                               # 1,000,000 chunks, IVF_FLAT
    .venv/bin/python bench/million.py --size 100000 --index HNSW

``--index``: ``IVF_FLAT`` (default: builds in minutes on 2 cores) or ``HNSW`` (about 250 s per
100,000 vectors on 2 cores: over the 15 minutes allowed at a million), set as the product sets
it (``MILVUS_INDEX_TYPE``, Milvus's default parameters). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.lexical import DATA, chunks, load  # noqa: E402
from bench.lookup import free_port_block, start_standalone, summary  # noqa: E402
from bench.processes import bench_environment, free_port, lookup_post, stop, web_wsgi  # noqa: E402

BIN = Path(sys.executable).parent
DIM = 512
BATCH = 10_000


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (gunicorn's worker, Celery's pool)."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def _children(pid: int) -> list[int]:
    found = []
    try:
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            found += [int(child), *_children(int(child))]
    except OSError:
        pass
    return found


def folder_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6, 1)


def filler_vectors(n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def exact_top10(vectors, queries) -> list[set[int]]:
    """FLAT search in numpy: the ten nearest rows (L2 on unit vectors = largest dot product)."""
    import numpy as np

    best = []
    for q in queries:
        scores = np.empty(len(vectors), dtype=np.float32)
        for start in range(0, len(vectors), 200_000):
            scores[start : start + 200_000] = vectors[start : start + 200_000] @ q
        top = np.argpartition(-scores, 10)[:10]
        best.append(set(int(i) for i in top))
    return best


def run(args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix="agentkb-million-"))
    milvus_port, web_port = free_port_block(args.standalone_port), free_port()
    bench_environment(
        work,
        f"http://127.0.0.1:{milvus_port}",
        MILVUS_COLLECTION="million",
        MILVUS_INDEX_TYPE=args.index,
        MILVUS_TIMEOUT="600",
    )
    milvus = web = worker = None
    out: dict = {"chunks": args.size, "index": args.index}
    timings: dict[str, float] = {}

    def timed(name: str, started: float) -> None:
        timings[name] = round(time.perf_counter() - started, 1)
        print(f"  {name}: {timings[name]} s", file=sys.stderr, flush=True)

    try:
        milvus = start_standalone(work / "milvus", milvus_port, log=work / "milvus.log")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections
        from django.utils import timezone

        from knowledge.embeddings import get_embedder
        from knowledge.lexical import get_lexical_engine
        from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
        from knowledge.vectorstore import get_vector_store
        from retrieval.agents.tokens import tool_token_issue

        call_command("migrate", verbosity=0)
        embedder = get_embedder()
        store = get_vector_store()
        store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
        corpus = load(args.data, seed=args.seed)

        # -- database rows: the documents (8 chunks each) and their chunk rows --
        started = time.perf_counter()
        rows = [
            (c.doc_key, c.domain, c.chunk_index, c.text, c.tokens)
            for c in chunks(corpus, args.size, seed=args.seed)
        ]
        timed("chunks_drawn_s", started)
        started = time.perf_counter()
        now = timezone.now()
        docs: dict[str, ApiDocument] = {}
        for doc_key, domain, _, text, _tokens in rows:
            if doc_key not in docs:
                docs[doc_key] = ApiDocument(
                    doc_key=doc_key,
                    title=text[:20],
                    domain=domain,
                    content="",
                    content_hash=uuid.uuid4().hex * 2,
                    metadata={},
                    status=ApiDocument.Status.INDEXED,
                    chunk_count=0,
                    indexed_at=now,
                )
            docs[doc_key].chunk_count += 1
        ApiDocument.objects.bulk_create(list(docs.values()), batch_size=2000)
        ids = dict(ApiDocument.objects.values_list("doc_key", "id"))
        for start in range(0, len(rows), 50_000):
            DocumentChunk.objects.bulk_create(
                [
                    DocumentChunk(document_id=ids[k], chunk_index=i, heading_path="", content=t)
                    for k, _, i, t, _ in rows[start : start + 50_000]
                ],
                batch_size=5000,
            )
        timed("database_s", started)

        # -- vectors (filler) into Milvus, then flush, index and load --
        vectors = filler_vectors(args.size, args.seed)
        client = store.client()
        started = time.perf_counter()
        for start in range(0, len(rows), BATCH):
            client.insert(
                store.collection,
                [
                    {
                        "chunk_id": chunk_id_for(k, i),
                        "vector": vectors[start + n].tolist(),
                        "domain": d,
                        "doc_key": k,
                        "chunk_index": i,
                        "text": t,
                    }
                    for n, (k, d, i, t, _) in enumerate(rows[start : start + BATCH])
                ],
            )
            if start and start % 200_000 == 0:
                print(f"  inserted {start:,}", file=sys.stderr, flush=True)
        timed("milvus_insert_s", started)
        started = time.perf_counter()
        client.flush(store.collection)
        timed("milvus_flush_s", started)
        started = time.perf_counter()
        while True:
            info = client.describe_index(store.collection, "vector")
            if int(info.get("indexed_rows", 0)) >= args.size and not int(info.get("pending_index_rows", 0)):
                break
            if time.perf_counter() - started > args.index_max:
                out["index_unfinished"] = info
                break
            time.sleep(5)
        timed("milvus_index_s", started)
        out["index_info"] = {k: v for k, v in info.items() if k not in ("field_name",)}
        started = time.perf_counter()
        client.release_collection(store.collection)
        client.load_collection(store.collection)
        timed("milvus_load_s", started)

        # -- the lexical index, as indexing writes it --
        from knowledge.lexical import LexicalChunk

        lexical = get_lexical_engine()
        out["lexical_engine"] = lexical.name
        started = time.perf_counter()
        for start in range(0, len(rows), 80_000):
            by_doc: dict[str, list] = {}
            for k, d, i, t, tokens in rows[start : start + 80_000]:
                by_doc.setdefault(k, []).append(LexicalChunk(chunk_id_for(k, i), k, d, i, tokens, t))
            lexical.documents_replace(by_doc)
        timed("lexical_index_s", started)

        # -- exact neighbours of the question vectors (recall) --
        questions = corpus.questions
        import numpy as np

        started = time.perf_counter()
        qvecs = np.vstack([embedder.encode_query(q) for q in questions]).astype(np.float32)
        exact = exact_top10(vectors, qvecs)
        timed("exact_search_s", started)
        row_of = {chunk_id_for(k, i): n for n, (k, _, i, _, _) in enumerate(rows)}
        found = [{row_of[h.chunk_id] for h in store.search(q.tolist(), top_k=10)} for q in qvecs]
        out["recall_at_10"] = round(
            sum(len(f & e) for f, e in zip(found, exact, strict=True)) / (10 * len(exact)), 3
        )
        del vectors

        # -- the processes: web (one gunicorn sync worker) and an idle Celery worker --
        token = tool_token_issue(name="bench-agent").key
        connections.close_all()
        env = dict(os.environ)
        worker = subprocess.Popen(
            [str(BIN / "celery"), "-A", "config", "worker", "--concurrency", "1", "--loglevel", "WARNING"],
            cwd=REPO,
            env=env,
            stdout=(work / "worker.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        web = web_wsgi(web_port, cwd=REPO, log=work / "web.log")

        invocations: list[str] = []

        def post(query: str) -> float:
            ms, _body, invocation = lookup_post(web_port, token, query)
            if invocation:
                invocations.append(invocation)
            return ms

        def raw(query: str) -> float:
            t0 = time.perf_counter()
            store.search(embedder.encode_query(query).tolist(), top_k=20)
            return (time.perf_counter() - t0) * 1000

        asked = questions[: args.queries]
        for q in questions[-6:]:  # warm up both sides on other questions
            post(q)
            raw(q)
        raw_ms = [raw(q) for q in asked]
        invocations.clear()  # the warm-up's calls are not timed
        endpoint_ms = [post(q) for q in asked]
        raw_ms += [raw(q) for q in asked]
        out["raw_dense_ms"] = summary(raw_ms)
        out["endpoint_ms"] = summary(endpoint_ms)
        out["endpoint_over_raw_dense_p50"] = round(out["endpoint_ms"]["p50"] / out["raw_dense_ms"]["p50"], 2)
        # Where the endpoint's time goes: the stage timings each call's record holds.
        from observability.models import ToolInvocation

        records = [
            details.get("timings") or {}
            for details in ToolInvocation.objects.filter(public_id__in=invocations).values_list(
                "retrieval_details", flat=True
            )
        ]
        keys = sorted({k for r in records for k, v in r.items() if isinstance(v, int | float)})
        out["server_timings_ms"] = {
            k: summary([r[k] for r in records if isinstance(r.get(k), int | float)]) for k in keys
        }
        time.sleep(2)
        out["rss_mb"] = {
            "web (gunicorn + its worker)": rss_mb(web.pid),
            "celery worker (idle)": rss_mb(worker.pid),
            "milvus (the server, its starter apart)": sum(rss_mb(c) for c in _children(milvus.pid)),
            "this bench process": rss_mb(os.getpid()),
        }
        out["disk_mb"] = {
            "milvus data": folder_mb(work / "milvus" / "data"),
            "lexical index": folder_mb(work / "lexical"),
            "sqlite": round((work / "agentkb.sqlite3").stat().st_size / 1e6, 1),
        }
        out["build_s"] = timings
        return out
    finally:
        stop(web)
        stop(worker)
        stop(milvus)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=1_000_000, help="chunks")
    parser.add_argument("--index", default="IVF_FLAT", choices=("IVF_FLAT", "HNSW"))
    parser.add_argument("--queries", type=int, default=40, help="questions timed through the endpoint")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--index-max", type=int, default=900, help="seconds to wait for the index")
    parser.add_argument("--standalone-port", type=int, default=28530)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    print(json.dumps(run(args), ensure_ascii=False, indent=2, default=str))


if __name__ == "__main__":
    main()
