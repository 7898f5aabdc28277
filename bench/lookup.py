"""lookup_knowledge latency: the endpoint through HTTP beside raw embed + Milvus search.

For each corpus size (chunks) the benchmark builds a throw-away agentkb in a temporary folder: a
SQLite database, a loopback ``milvus-lite server`` and ``gunicorn config.wsgi`` (one sync worker,
DEBUG off, recording on), loads a synthetic corpus (10 chunks per document, 10 keywords per
document, real embeddings), then for the same queries, in the same run, measures:

- raw dense: embed the query + ``VectorStore.search`` (top_k 20) from this process, through the
  same milvus-lite server: what a lookup paid before hybrid search;
- raw lexical: BM25 alone in the lexical engine in force (tantivy beside milvus-lite; the index
  is written for the corpus as indexing writes it), on the query's terms as the lookup sends them;
- raw hybrid: embed the query + the lookup's own hybrid search (``FusedSearch``: dense in Milvus,
  BM25 in the lexical engine, fused; top_k 20): the floor the hybrid lookup pays;
- endpoint, first: ``POST /api/tools/lookup_knowledge`` with a query the server has not seen
  (fresh session each time, so every answer is a full result), recorded in tool_invocation;
- endpoint, repeated: the same queries again (query vectors and L1 hits cached);
- the recording's INSERT on its own, and the server-side timings the records hold;
- optionally (--blas-compare) raw search with the milvus-lite server on numpy's default BLAS
  threads instead of one.

``--stores lite,standalone`` runs every size against each vector store in turn, in the same run:
``lite`` is the loopback ``milvus-lite server`` (what ``make run`` starts), ``standalone`` the C++
Milvus 2.3.5 standalone server (the ``milvus-server`` extra, started by
``scripts/milvus_standalone.py`` on loopback ports ``--standalone-port`` to +11, data in the
run's temporary folder). Milvus 2.3 has no BM25 function, so the lexical side is the embedded
engine on both.

    .venv/bin/python bench/lookup.py                          # 1,000 chunks
    .venv/bin/python bench/lookup.py --sizes 1000,100000      # + 100,000 (several minutes)
    .venv/bin/python bench/lookup.py --sizes 100000 --stores lite,standalone
    .venv/bin/python bench/lookup.py --sizes 100000 --blas-compare

Embeddings of the synthetic chunks are cached in var/bench/ (the 100,000-chunk set takes a few
minutes to embed once). Milvus rows are flushed after loading, as a sealed collection is what
milvus-lite 3.x searches fast; ``--unflushed`` also times raw search before the flush.
Nothing is asserted: the figures are printed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.processes import (  # noqa: E402
    bench_environment,
    free_port,
    lookup_post,
    stop,
    wait_for_port,
    web_wsgi,
)

BIN = Path(sys.executable).parent
CACHE = REPO / "var" / "bench"

CHUNKS_PER_DOC = 10
STORE_LABELS = {"lite": "milvus-lite server", "standalone": "Milvus 2.3.5"}
KEYWORDS_PER_DOC = 10
DOMAINS = [
    "infrastructure",
    "api",
    "payment",
    "troubleshooting",
    "security",
    "storage",
    "network",
    "monitoring",
    "deployment",
    "database",
    "messaging",
    "auth",
]
SUBJECTS = [
    "数据库连接池",
    "Redis 缓存",
    "消息队列",
    "负载均衡",
    "证书轮换",
    "日志采集",
    "告警规则",
    "灰度发布",
    "限流策略",
    "分布式锁",
    "对象存储",
    "索引优化",
    "慢查询",
    "线程池",
    "熔断降级",
    "服务注册",
    "配置中心",
    "链路追踪",
    "容器调度",
    "备份恢复",
]
ASPECTS = [
    "配置方法",
    "参数说明",
    "常见错误",
    "排查步骤",
    "性能调优",
    "容量规划",
    "监控指标",
    "升级指南",
    "最佳实践",
    "故障案例",
]
SERVICES = [
    "订单",
    "支付",
    "库存",
    "用户",
    "搜索",
    "推荐",
    "结算",
    "物流",
    "客服",
    "风控",
    "营销",
    "账务",
    "审计",
]
ENVS = ["生产", "测试", "预发"]
PARAMS = [
    "maximumPoolSize",
    "connectionTimeout",
    "maxmemory",
    "prefetch",
    "keepalive",
    "retries",
    "ttl",
    "shards",
]


# --- the synthetic corpus ---------------------------------------------------------------------------
def _doc_topic(i: int) -> tuple[str, str, str]:
    return (
        SUBJECTS[i % len(SUBJECTS)],
        SERVICES[(i // len(SUBJECTS)) % len(SERVICES)],
        DOMAINS[i % len(DOMAINS)],
    )


def corpus_chunks(n_chunks: int) -> list[tuple[int, int, str]]:
    """(document number, chunk index, text) for n_chunks chunks."""
    rows = []
    for c in range(n_chunks):
        i, j = divmod(c, CHUNKS_PER_DOC)
        subject, service, _ = _doc_topic(i)
        aspect = ASPECTS[j % len(ASPECTS)]
        env = ENVS[(i + j) % len(ENVS)]
        param = PARAMS[(i * 7 + j) % len(PARAMS)]
        rows.append(
            (
                i,
                j,
                f"{service}服务的{subject}{aspect}：介绍{env}环境下{subject}的{aspect}，"
                f"包括 {param} 等参数的取值与注意事项（文档 {i} 第 {j + 1} 节）。",
            )
        )
    return rows


def doc_keywords(i: int) -> list[str]:
    return [f"CODE{i:06d}{chr(65 + k)}" for k in range(KEYWORDS_PER_DOC)]


def queries(n_chunks: int, count: int, seed: int = 11) -> list[str]:
    """Distinct queries: three in four in natural language, one in four an exact keyword."""
    rng = random.Random(seed)
    n_docs = n_chunks // CHUNKS_PER_DOC
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        i = rng.randrange(n_docs)
        subject, service, _ = _doc_topic(i)
        if len(out) % 4 == 3:
            q = f"{rng.choice(doc_keywords(i))} 是什么错误"
        else:
            q = f"{service}服务{subject}的{rng.choice(ASPECTS)}（{rng.choice(ENVS)}环境）"
        if q not in seen:
            seen.add(q)
            out.append(q)
    return out


def embeddings(texts: list[str], model_name: str, encode) -> np.ndarray:  # noqa: F821
    import numpy as np

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"vectors-{model_name.replace('/', '_').replace(':', '_')}-{len(texts)}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    parts = []
    for start in range(0, len(texts), 256):
        parts.append(encode(texts[start : start + 256]))
        if start and (start // 256) % 40 == 0:
            print(f"  embedded {start:,} / {len(texts):,} chunks", file=sys.stderr, flush=True)
    vectors = np.vstack(parts).astype(np.float32)
    np.save(path, vectors)
    print(f"  embedded {len(texts):,} chunks in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return vectors


# --- processes ----------------------------------------------------------------------------------------
def start_milvus(data_dir: Path, port: int, *, one_blas_thread: bool, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if one_blas_thread:
            env[name] = "1"
        else:
            env.pop(name, None)
    proc = subprocess.Popen(
        [
            str(BIN / "milvus-lite"),
            "server",
            "--data-dir",
            str(data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    wait_for_port(port, proc)
    return proc


def free_port_block(first: int, count: int = 12) -> int:
    """The first of ``count`` consecutive free loopback ports, from ``first`` upwards in steps of
    20. Bound as the server binds them (no SO_REUSEADDR): a port a stopped server left in
    TIME_WAIT counts as taken."""
    for base in range(first, first + 2000, 20):
        free = True
        for port in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    free = False
                    break
        if free:
            return base
    sys.exit(f"no {count} consecutive free loopback ports from {first}")


def start_standalone(data_dir: Path, port: int, *, log: Path) -> subprocess.Popen:
    """Milvus 2.3.5 standalone through the repository's starter on ports ``port`` to +11;
    stopping the starter (SIGTERM) stops the server. Ready when the starter prints the URI."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "scripts" / "milvus_standalone.py"),
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 180
    while "MILVUS_URI=" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            sys.exit(f"Milvus 2.3.5 standalone did not start:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    return proc


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def summary(values: list[float]) -> dict:
    return {"p50": round(pct(values, 50), 1), "p95": round(pct(values, 95), 1), "n": len(values)}


# --- one size, in a process of its own (Django settings are per process) ---------------------------
def run_size(n_chunks: int, args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"agentkb-bench-{n_chunks}-{args.store}-"))
    milvus_port = free_port_block(args.standalone_port) if args.store == "standalone" else free_port()
    web_port = free_port()
    bench_environment(
        work,
        f"http://127.0.0.1:{milvus_port}",
        MILVUS_COLLECTION="bench_chunks",
        MILVUS_TIMEOUT="120",
    )
    milvus = web = None
    result: dict = {"chunks": n_chunks, "store": STORE_LABELS[args.store]}
    try:
        if args.store == "standalone":
            milvus = start_standalone(work / "milvus", milvus_port, log=work / "milvus.log")
        else:
            # Default BLAS threads, as `make run` starts it (--blas-compare times one thread too).
            milvus = start_milvus(
                work / "milvus", milvus_port, one_blas_thread=False, log=work / "milvus.log"
            )

        import django

        django.setup()
        from django.core.management import call_command
        from django.utils import timezone

        from knowledge.embeddings import get_embedder
        from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
        from knowledge.vectorstore import get_vector_store
        from observability.models import ToolInvocation
        from observability.services import invocation_record
        from retrieval.agents.tokens import tool_token_issue

        call_command("migrate", verbosity=0)
        embedder = get_embedder()
        store = get_vector_store()
        store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)

        # -- corpus: database rows, then vectors (inserted in batches, then flushed) --
        started = time.perf_counter()
        chunks = corpus_chunks(n_chunks)
        vectors = embeddings(
            [t for _, _, t in chunks], embedder.model_name, lambda b: embedder.encode(b, batch_size=128)
        )
        n_docs = n_chunks // CHUNKS_PER_DOC
        now = timezone.now()
        docs = []
        for i in range(n_docs):
            subject, service, domain = _doc_topic(i)
            text = "\n\n".join(t for _, _, t in chunks[i * CHUNKS_PER_DOC : (i + 1) * CHUNKS_PER_DOC])
            docs.append(
                ApiDocument(
                    doc_key=f"{domain}/doc-{i:06d}.md",
                    title=f"{service}服务{subject}手册 {i}",
                    domain=domain,
                    content=text,
                    content_hash=f"{i:064d}",
                    metadata={"keywords": doc_keywords(i)},
                    status=ApiDocument.Status.INDEXED,
                    chunk_count=CHUNKS_PER_DOC,
                    indexed_at=now,
                )
            )
        ApiDocument.objects.bulk_create(docs, batch_size=500)
        ids = dict(ApiDocument.objects.values_list("doc_key", "id"))
        DocumentChunk.objects.bulk_create(
            [
                DocumentChunk(
                    document_id=ids[docs[i].doc_key], chunk_index=j, heading_path=docs[i].title, content=text
                )
                for i, j, text in chunks
            ],
            batch_size=2000,
        )
        db_seconds = time.perf_counter() - started
        started = time.perf_counter()
        client = store.client()
        for start in range(0, n_chunks, 5000):
            batch = chunks[start : start + 5000]
            client.insert(
                store.collection,
                [
                    {
                        "chunk_id": chunk_id_for(docs[i].doc_key, j),
                        "vector": vectors[start + k].tolist(),
                        "domain": docs[i].domain,
                        "doc_key": docs[i].doc_key,
                        "chunk_index": j,
                        # What ingestion stores: the embedded text (title, then the chunk).
                        "text": f"{docs[i].title}\n{text}",
                    }
                    for k, (i, j, text) in enumerate(batch)
                ],
            )
        insert_seconds = time.perf_counter() - started

        # -- the lexical index (tantivy beside milvus-lite, as indexing writes it) --
        from knowledge.lexical import get_lexical_engine, lexical_engine_choice
        from knowledge.services.lexical import lexical_chunk

        started = time.perf_counter()
        lexical = get_lexical_engine()
        result["lexical_engine"] = f"{lexical.name} ({lexical_engine_choice().reason})"
        if lexical.separate:
            for start in range(0, n_docs, 1000):
                lexical.documents_replace(
                    {
                        docs[i].doc_key: [
                            lexical_chunk(
                                doc_key=docs[i].doc_key,
                                domain=docs[i].domain,
                                chunk_index=j,
                                text=f"{docs[i].title}\n{text}",
                            )
                            for _, j, text in chunks[i * CHUNKS_PER_DOC : (i + 1) * CHUNKS_PER_DOC]
                        ]
                        for i in range(start, min(start + 1000, n_docs))
                    }
                )
        lexical_seconds = time.perf_counter() - started
        qs = queries(n_chunks, args.queries)

        def raw(query: str) -> tuple[float, float]:
            t0 = time.perf_counter()
            vector = embedder.encode_query(query)
            t1 = time.perf_counter()
            store.search(vector.tolist(), top_k=20)
            return (t1 - t0) * 1000, (time.perf_counter() - t1) * 1000

        from knowledge.lexical import query_tokens
        from retrieval.lookup.query_terms import bm25_query_text
        from retrieval.lookup.search import SearchQuery
        from retrieval.lookup.vector_search import chunk_search_for, l1_mode

        hybrid = chunk_search_for(store, l1_mode())

        def raw_hybrid(query: str) -> tuple[float, float]:
            """The lookup's own hybrid search, embedding included as the lookup does it (BM25 and
            its hits' vectors fetched while the query is embedded): (embed ms, the rest ms)."""
            spent: dict[str, float] = {}

            def embed() -> list[float]:
                t = time.perf_counter()
                vector = embedder.encode_query(query).tolist()
                spent["embed"] = (time.perf_counter() - t) * 1000
                return vector

            t0 = time.perf_counter()
            tokens = query_tokens(bm25_query_text(query))  # what the lookup's BM25 request searches
            hybrid.search(SearchQuery(query, embed, tokens), top_k=20, domains=None)
            total = (time.perf_counter() - t0) * 1000
            return spent["embed"], total - spent["embed"]

        def raw_lexical(query: str) -> float:
            t0 = time.perf_counter()
            lexical.search(query_tokens(bm25_query_text(query)), top_k=20)
            return (time.perf_counter() - t0) * 1000

        if args.unflushed:
            result["raw_search_unflushed_ms"] = summary([raw(q)[1] for q in qs[:5]])
        started = time.perf_counter()
        client.flush(store.collection)
        while client.describe_index(store.collection, "vector").get("pending_index_rows", 0):
            time.sleep(0.5)
        flush_seconds = time.perf_counter() - started
        # milvus-lite 3.x keeps working on freshly flushed segments for a while (search at 100k
        # is several times slower in the first minute): wait until search time stops falling.
        started = time.perf_counter()
        probes, settle = queries(n_chunks, 5, seed=7), []
        while True:
            settle.append(round(statistics.median(raw(q)[1] for q in probes), 1))
            if len(settle) >= 2 and settle[-1] >= 0.8 * settle[-2]:
                break
            if time.perf_counter() - started > args.settle_max:
                break
            time.sleep(10)
        result["settle"] = {"seconds": round(time.perf_counter() - started), "search_p50_ms": settle}
        result["load_s"] = {
            "database": round(db_seconds, 1),
            "milvus_insert": round(insert_seconds, 1),
            "lexical_index": round(lexical_seconds, 1),
            "flush_and_index": round(flush_seconds, 1),
        }
        token = tool_token_issue(name="bench-agent").key
        # The server starts on a committed, closed database.
        from django.db import connections

        connections.close_all()

        # -- the web server --
        web = web_wsgi(web_port, cwd=REPO, log=work / "web.log")

        def post(query: str) -> tuple[float, dict, str | None]:
            return lookup_post(web_port, token, query)

        def get_schema() -> float:
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", web_port, timeout=60)
            conn.request(
                "GET", "/api/tools/lookup_knowledge/schema", headers={"Authorization": f"Token {token}"}
            )
            response = conn.getresponse()
            response.read()
            conn.close()
            if response.status != 200:
                raise RuntimeError(f"schema: {response.status}")
            return (time.perf_counter() - t0) * 1000

        # Warm up both sides (model loading, L0 index build, collection load) on other queries.
        started = time.perf_counter()
        for q in queries(n_chunks, 6, seed=99):
            post(q)
            raw(q)
            raw_hybrid(q)
        result["warm_up_s"] = round(time.perf_counter() - started, 1)

        # Raw and endpoint in separate back-to-back passes (raw, endpoint first-time, endpoint
        # repeated, raw again): interleaving them one query at a time let the milvus-lite
        # server's BLAS threads, still spinning after a raw search, slow the next request.
        raw_embed, raw_search, raw_total, first, repeated, levels, first_ids = [], [], [], [], [], {}, []
        hybrid_search, hybrid_total, lexical_search = [], [], []

        def raw_pass() -> None:
            for q in qs:
                e, s = raw(q)
                raw_embed.append(e)
                raw_search.append(s)
                raw_total.append(e + s)
            for q in qs:
                e, s = raw_hybrid(q)
                hybrid_search.append(s)
                hybrid_total.append(e + s)
            for q in qs:
                lexical_search.append(raw_lexical(q))

        raw_pass()
        for q in qs:
            elapsed, body, inv = post(q)
            first.append(elapsed)
            first_ids.append(inv)
            levels[body["relevanceLevel"]] = levels.get(body["relevanceLevel"], 0) + 1
        for q in qs:
            repeated.append(post(q)[0])
        raw_pass()
        baseline = [get_schema() for _ in range(len(qs))]

        records = list(
            ToolInvocation.objects.filter(public_id__in=first_ids).values_list("retrieval_details", flat=True)
        )
        server = {
            key: summary([r["timings"][key] for r in records])
            for key in (
                "l0_ms",
                "embed_ms",
                "search_ms",
                "lexical_ms",
                "documents_ms",
                "content_ms",
                "db_ms",
                "tracker_ms",
                "total_ms",
            )
        }
        # The recording's INSERT alone: the same details, written from this process.
        insert_ms = []
        for details in records[:30]:
            t0 = time.perf_counter()
            invocation_record(
                tool_name="lookup_knowledge_bench",
                session_id="bench",
                request={"query": details["query"], "session_id": "bench"},
                status="SUCCESS",
                duration_ms=1,
                result_summary="bench",
                relevance_level=details["relevance_level"],
                dedup_reason=details["dedup_reason"],
                retrieval_details=details,
            )
            insert_ms.append((time.perf_counter() - t0) * 1000)

        result.update(
            {
                "queries": len(qs),
                "levels": levels,
                "raw_embed_ms": summary(raw_embed),
                "raw_search_ms": summary(raw_search),
                "raw_ms": summary(raw_total),
                "raw_hybrid_search_ms": summary(hybrid_search),
                "raw_lexical_search_ms": summary(lexical_search),
                "raw_hybrid_ms": summary(hybrid_total),
                "endpoint_first_ms": summary(first),
                "endpoint_repeated_ms": summary(repeated),
                "http_baseline_ms": summary(baseline),
                "server_timings_ms": server,
                "record_insert_ms": summary(insert_ms),
                "l0_keywords": n_docs * KEYWORDS_PER_DOC,
            }
        )
        result["ratio_endpoint_to_raw_p50"] = round(
            result["endpoint_first_ms"]["p50"] / result["raw_ms"]["p50"], 2
        )
        result["ratio_endpoint_to_raw_hybrid_p50"] = round(
            result["endpoint_first_ms"]["p50"] / result["raw_hybrid_ms"]["p50"], 2
        )
        result["first_over_repeated_p50"] = round(
            result["endpoint_first_ms"]["p50"] / result["endpoint_repeated_ms"]["p50"], 1
        )

        if args.blas_compare and args.store == "lite":
            stop(web)
            web = None
            # Restart the server each way on the same data and time the same queries, twice in
            # alternation (default, one, default, one), so neither gets the warmer server.
            timings: dict[str, list[float]] = {"raw_search_default_blas_ms": [], "raw_search_one_blas_ms": []}
            for label, one_thread in (
                ("raw_search_default_blas_ms", False),
                ("raw_search_one_blas_ms", True),
            ) * 2:
                stop(milvus)
                milvus = start_milvus(
                    work / "milvus", milvus_port, one_blas_thread=one_thread, log=work / "milvus.log"
                )
                store.reset()
                store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
                for q in queries(n_chunks, 6, seed=99):
                    raw(q)
                timings[label] += [raw(q)[1] for q in qs]
            result.update({label: summary(values) for label, values in timings.items()})
        return result
    finally:
        stop(web)
        stop(milvus)
        if args.keep:
            print(f"  kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _print(results: list[dict]) -> None:
    def row(label: str, key: str) -> str:
        cells = []
        for r in results:
            v = r.get(key)
            cells.append("-" if v is None else f"{v['p50']:>8.1f} / {v['p95']:<8.1f}")
        return f"{label:<44}" + "".join(f"{c:>22}" for c in cells)

    print()
    print(f"{'chunks':<44}" + "".join(f"{r['chunks']:>22,}" for r in results))
    print(f"{'vector store':<44}" + "".join(f"{r['store']:>22}" for r in results))
    print(f"{'queries (levels)':<44}" + "".join(f"{r['queries']:>22}" for r in results))
    for r in results:
        print(
            f"  {r['chunks']:,} chunks, {r['store']}: levels {r['levels']}, L0 keywords {r['l0_keywords']:,}, load {r['load_s']}"
        )
    print("ms, p50 / p95")
    print(row("raw: embed", "raw_embed_ms"))
    print(row("raw: Milvus search (loopback server)", "raw_search_ms"))
    print(row("raw: embed + search", "raw_ms"))
    for r in results:
        print(f"  {r['chunks']:,} chunks, {r['store']}: lexical engine {r.get('lexical_engine')}")
    print(row("raw: lexical search (BM25 alone)", "raw_lexical_search_ms"))
    print(row("raw: hybrid search (dense + BM25, fused)", "raw_hybrid_search_ms"))
    print(row("raw: embed + hybrid search", "raw_hybrid_ms"))
    print(row("endpoint via HTTP, first time", "endpoint_first_ms"))
    print(row("endpoint via HTTP, repeated query", "endpoint_repeated_ms"))
    print(row("HTTP baseline: GET tool schema (auth+throttle)", "http_baseline_ms"))
    print(row("recording INSERT alone", "record_insert_ms"))
    if any("raw_search_default_blas_ms" in r for r in results):
        print(row("raw: search after restart, default BLAS", "raw_search_default_blas_ms"))
        print(row("raw: search after restart, 1 BLAS thread", "raw_search_one_blas_ms"))
    if any("raw_search_unflushed_ms" in r for r in results):
        print(row("raw: Milvus search before flush", "raw_search_unflushed_ms"))
    for key in (
        "l0_ms",
        "embed_ms",
        "search_ms",
        "lexical_ms",
        "documents_ms",
        "content_ms",
        "db_ms",
        "tracker_ms",
        "total_ms",
    ):
        cells = "".join(
            f"{r['server_timings_ms'][key]['p50']:>8.1f} / {r['server_timings_ms'][key]['p95']:<8.1f}".rjust(
                22
            )
            for r in results
        )
        print(f"{'  server side (first), ' + key:<44}{cells}")
    print(
        f"{'endpoint p50 / raw hybrid p50':<44}"
        + "".join(f"{r['ratio_endpoint_to_raw_hybrid_p50']:>22}" for r in results)
    )
    print(
        f"{'endpoint p50 / raw dense p50 (<= 1.2 at 100k)':<44}"
        + "".join(f"{r['ratio_endpoint_to_raw_p50']:>22}" for r in results)
    )
    print(
        f"{'first p50 / repeated p50 (target >= 5)':<44}"
        + "".join(f"{r['first_over_repeated_p50']:>22}" for r in results)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000", help="comma-separated chunk counts, e.g. 1000,100000")
    parser.add_argument("--queries", type=int, default=40, help="distinct queries per size")
    parser.add_argument(
        "--blas-compare", action="store_true", help="also time raw search on default BLAS threads"
    )
    parser.add_argument(
        "--unflushed", action="store_true", help="also time raw search before the Milvus flush"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument(
        "--settle-max", type=int, default=300, help="seconds to wait at most for search times to settle"
    )
    parser.add_argument(
        "--stores",
        default="lite",
        help="comma-separated vector stores, each measured in turn: lite (milvus-lite server), "
        "standalone (Milvus 2.3.5, the milvus-server extra)",
    )
    parser.add_argument(
        "--standalone-port",
        type=int,
        default=28530,
        help="Milvus 2.3.5 takes 12 consecutive loopback ports, the first free block from this one",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    parser.add_argument("--one-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", choices=sorted(STORE_LABELS), default="lite", help=argparse.SUPPRESS)
    args = parser.parse_args()
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = [s for s in stores if s not in STORE_LABELS]
    if unknown or not stores:
        parser.error(f"--stores: {', '.join(unknown) or 'none given'}; choose from {', '.join(STORE_LABELS)}")

    if args.one_size:
        print("RESULT " + json.dumps(run_size(args.one_size, args), ensure_ascii=False), flush=True)
        return

    results = []
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    for size in sizes:
        if size % CHUNKS_PER_DOC:
            sys.exit(f"--sizes: {size} is not a multiple of {CHUNKS_PER_DOC}")
    for size, store in [(size, store) for size in sizes for store in stores]:
        print(f"== {size:,} chunks, {STORE_LABELS[store]}", file=sys.stderr, flush=True)
        command = [sys.executable, __file__, "--one-size", str(size), "--queries", str(args.queries)]
        command += ["--settle-max", str(args.settle_max), "--store", store]
        command += ["--standalone-port", str(args.standalone_port)]
        command += [
            flag
            for flag, on in (
                ("--blas-compare", args.blas_compare),
                ("--unflushed", args.unflushed),
                ("--keep", args.keep),
            )
            if on
        ]
        out = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        if out.returncode != 0 or not lines:
            sys.exit(f"the {size:,}-chunk run on {STORE_LABELS[store]} failed (exit {out.returncode})")
        results.append(json.loads(lines[-1][len("RESULT ") :]))
    _print(results)
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
