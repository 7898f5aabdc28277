"""Ingestion throughput: the real pipeline vs raw embed + insert of the same chunks, same run.

Generates N Markdown documents (frontmatter, headings, Chinese and English prose, code fences,
tables), then:

1. pipeline: the documents go through the bulk path (``items_ingest``, as a bulk upload, a zip or
   ``import_documents``): each is parsed and stored, then indexed in batches of
   INGEST_INDEX_BATCH_DOCUMENTS documents by the batch task's work (chunk, embed across the
   batch's documents, one upsert into Milvus, swap chunk rows and mark INDEXED per document,
   prune); with ``--per-document`` each document is indexed by a run of its own instead (a
   single upload's path);
2. raw: the very chunk texts the pipeline embedded are embedded in batches of
   EMBEDDING_BATCH_SIZE and inserted into a fresh collection, nothing else;

and prints documents/s and chunks/s of both and their ratio, plus where the pipeline's time goes.

Two ways to run the pipeline:
- default, in-process: tasks are queued to an in-memory broker nobody consumes and the bench runs
  each queued indexing itself, as the worker would (no Celery transport in the figures);
- ``--worker``: the whole thing as ``make run`` has it: a real Celery worker process on the
  filesystem broker and a loopback ``milvus-lite server`` shared by worker and bench; timed from
  the first upload until the last document is INDEXED.

    .venv/bin/python bench/ingest.py                 # 200 documents, in-process
    .venv/bin/python bench/ingest.py --docs 1000
    .venv/bin/python bench/ingest.py --worker
    .venv/bin/python bench/ingest.py --docs 60 --per-document   # one run per document
    .venv/bin/python bench/ingest.py --docs 1000 --embedder null   # the pipeline alone, µs a chunk
    .venv/bin/python bench/ingest.py --docs 1000 --embedder gpu    # embedding taking a GPU's time
    .venv/bin/python bench/ingest.py --docs 1000 --embedder null --milvus-uri http://127.0.0.1:26530
    .venv/bin/python bench/ingest.py --docs 1000 --embedder null --lite-server

``--embedder null`` swaps the model for one returning fixed unit vectors at no cost, so what is
left is the pipeline's own work (parse, chunk, rows, vectors and lexical entries written, status):
printed as microseconds per chunk by stage, with the upsert stage's parts under it (waiting for the
lexical analysis, the lexical write, then waiting for Milvus: which of them the stage waited on).
``--embedder gpu`` returns the same vectors but takes the time a GPU would (5,600 chunks/s,
sleeping): the lexical analysis runs meanwhile, as it does beside a real embedder, and the figure
is what ingest at GPU speed takes in all.
``--milvus-uri`` writes the vectors to that Milvus server (e.g. Milvus 2.3.5 standalone from
``make milvus-standalone``) instead of embedded milvus-lite. ``--lite-server`` sends them to a
loopback ``milvus-lite server`` process, the embedded default as ``make run`` deploys it: embedded
in the bench's process, milvus-lite's engine (Python) runs in threads beside the pipeline and
shares its GIL, which a deployment does not.

Everything lives in a temporary folder (SQLite + milvus-lite); nothing of var/ is touched.
Prints figures only; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

#: chunks/s of a BGE-M3-sized encoder on one H200 in fp16, 128-token chunks (issue 29's figure)
GPU_CHUNKS_PER_S = 5600.0

DOMAINS = ["infrastructure", "api-errors", "troubleshooting", "payment"]
ZH = [
    "数据库连接池的大小要根据实例规格来定，不能一味调大。",
    "支付超时的时候不能直接重试下单，要先查询渠道的支付结果。",
    "退款到账时间取决于支付方式，信用卡最长需要七个工作日。",
    "大 key 会阻塞单线程的 Redis，删除时要用 UNLINK。",
    "接口变慢时先确认范围，再看依赖，最后看应用自身的线程池。",
    "令牌过期以后用刷新令牌换取新令牌，只重放一次原请求。",
]
EN = [
    "The readiness probe must check what the service needs to answer requests.",
    "Timeouts are retryable only for idempotent requests, with exponential backoff.",
    "Keep both the old and the new certificate loaded during the rotation window.",
    "A pool that is too large only moves the queue into the database.",
    "Send synthetic warm-up requests before marking a fresh JVM ready.",
    "Every error response quotes a request id; include it when asking for help.",
]


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=200, help="documents to generate (default 200)")
    parser.add_argument("--sections", type=int, default=4, help="sections per document (default 4)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--worker", action="store_true", help="index with a real Celery worker process")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=2,
        help="worker processes with --worker (default 2, as the Procfile)",
    )
    parser.add_argument(
        "--per-document", action="store_true", help="index each document in a run of its own (in-process)"
    )
    parser.add_argument(
        "--lexical-compare",
        action="store_true",
        help="then the in-process pipeline again without and with the lexical index, alternately "
        "(each run on emptied stores): the cost of writing BM25 beside the vectors",
    )
    parser.add_argument(
        "--embedder",
        choices=("model", "null", "gpu"),
        default="model",
        help="null: fixed unit vectors at no cost (the pipeline's own work alone); gpu: the same "
        f"vectors, each batch taking the time a GPU would ({GPU_CHUNKS_PER_S:,.0f} chunks/s, "
        "sleeping, so the pipeline's threads run meanwhile as they would beside a GPU)",
    )
    parser.add_argument(
        "--milvus-uri", help="a Milvus server for the vectors (default: embedded milvus-lite)"
    )
    parser.add_argument(
        "--lite-server",
        action="store_true",
        help="in-process, the vectors go to a loopback milvus-lite server process, as make run has it "
        "(default: milvus-lite embedded in this process, its engine sharing the pipeline's GIL)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    # --worker with --embedder null/gpu: the bench starts its worker through itself, so the
    # worker's processes (forked after the embedder is set) embed as the bench asks.
    parser.add_argument("--celery-worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def generate(n: int, sections: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    documents = []
    for i in range(n):
        domain = DOMAINS[i % len(DOMAINS)]
        zh = i % 2 == 0
        title = f"{'排查手册' if zh else 'Runbook'} {i}"
        parts = [
            f"---\ntitle: {title}\ndomain: {domain}\nkeywords: [kw-{i}, {domain}-{i % 17}]\n---\n",
            f"# {title}\n",
        ]
        for s in range(sections):
            parts.append(f"## {'第' + str(s) + '节' if zh else 'Section ' + str(s)}\n")
            pool = ZH if zh else EN
            for _ in range(rng.randint(1, 3)):
                parts.append(
                    ("" if zh else " ").join(rng.choice(pool) for _ in range(rng.randint(2, 8))) + "\n"
                )
            if rng.random() < 0.3:
                parts.append(
                    "```bash\n" + "\n".join(f"echo step {k}" for k in range(rng.randint(2, 12))) + "\n```\n"
                )
            if rng.random() < 0.2:
                rows = "\n".join(f"| ERR_{k} | 含义 {k} | {k % 2 == 0} |" for k in range(rng.randint(2, 10)))
                parts.append("| code | meaning | retry |\n|---|---|---|\n" + rows + "\n")
        documents.append((f"{domain}/doc-{i:05d}.md", "\n".join(parts).encode()))
    return documents


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"milvus-lite server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit("milvus-lite server did not start")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    args = _parse_args()
    if args.celery_worker:
        _celery_worker(args)
        return
    folder = Path(tempfile.mkdtemp(prefix="agentkb-bench-ingest-"))
    if not args.keep:
        # Registered before pymilvus starts embedded milvus-lite, so it runs after milvus-lite's
        # own exit handler has written its files (exit handlers run last-registered first).
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    processes: list[subprocess.Popen] = []
    try:
        os.environ.update(
            AGENTKB_VAR_DIR=str(folder),
            DJANGO_SETTINGS_MODULE="config.settings",
            DATABASE_URL=f"sqlite:///{folder / 'bench.sqlite3'}",
            LOG_LEVEL="WARNING",
            MILVUS_COLLECTION="bench_pipeline",
            # As production runs: DEBUG on keeps every SQL query's text (about 10% of the
            # pipeline's time); DEBUG off asks for a secret and hosts, never used here.
            DEBUG="false",
            SECRET_KEY="bench-ingest-only-" + "x" * 40,
            ALLOWED_HOSTS="localhost",
        )
        for name in ("REDIS_URL", "CELERY_BROKER_URL", "MILVUS_URI"):
            os.environ.pop(name, None)
        if args.milvus_uri:
            os.environ["MILVUS_URI"] = args.milvus_uri
            os.environ["MILVUS_COLLECTION"] = f"bench_pipeline_{os.getpid()}"
        if (args.worker or args.lite_server) and not args.milvus_uri:
            port = _free_port()
            server = subprocess.Popen(
                [str(Path(sys.executable).parent / "milvus-lite"), "server", "--data-dir", str(folder / "milvus"),
                 "--host", "127.0.0.1", "--port", str(port)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            processes.append(server)
            _wait_port(port, server)
            os.environ["MILVUS_URI"] = f"http://127.0.0.1:{port}"
        if not args.worker:
            # A broker nobody consumes: uploads queue their indexing, the bench runs it below.
            os.environ["CELERY_BROKER_URL"] = "memory://"

        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        run(args, settings, folder, processes)
    finally:
        for proc in reversed(processes):
            _stop(proc)
        if args.keep:
            print(f"\nkept {folder}")


def run(args, settings, folder: Path, processes: list[subprocess.Popen]) -> None:
    import numpy as np

    from knowledge.embeddings import get_embedder
    from knowledge.models import ApiDocument, DocumentChunk, chunk_id_for
    from knowledge.services.chunk_preparation import chunk_embedding_text
    from knowledge.services.documents import document_ingest
    from knowledge.services.index_queue import IndexQueue, index_batches
    from knowledge.services.indexing import document_index, documents_index
    from knowledge.services.uploads import UploadItem, items_ingest
    from knowledge.vectorstore import ChunkVector, VectorStore, get_vector_store

    documents = generate(args.docs, args.sections, args.seed)
    if args.embedder in ("null", "gpu"):
        from knowledge.embeddings import registry

        registry._embedder = NullEmbedder() if args.embedder == "null" else SimulatedGpuEmbedder()
    started = time.perf_counter()
    embedder = get_embedder()
    load_s = time.perf_counter() - started
    store = get_vector_store()
    store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)  # not part of either timing

    print(
        f"agentkb ingestion benchmark: {len(documents)} documents, {sum(len(d) for _, d in documents):,} bytes"
    )
    print(
        f"  embedding   {embedder.model_name} ({embedder.dim}-d), loaded in {load_s:.1f} s (not timed below)"
    )
    print(f"  vectors     {settings.MILVUS_URI}")
    print(f"  chunking    target {settings.CHUNK_TARGET_CHARS}, overlap {settings.CHUNK_OVERLAP_CHARS}")

    # The chunks the pipeline will embed, computed with its own functions, for the raw runs.
    from knowledge.chunking import chunk_document
    from knowledge.parsing import parse_document

    raw_rows: list[tuple[str, str, str, int, str]] = []  # chunk id, domain, doc key, index, text
    for name, data in documents:
        parsed = parse_document(data, name=name)
        for c in chunk_document(
            parsed.body, target=settings.CHUNK_TARGET_CHARS, overlap=settings.CHUNK_OVERLAP_CHARS
        ):
            text = chunk_embedding_text(title=parsed.title, heading_path=c.heading_path, content=c.content)
            raw_rows.append(
                (chunk_id_for(parsed.doc_key, c.index), parsed.domain, parsed.doc_key, c.index, text)
            )

    def raw_run(label: str) -> tuple[float, float, VectorStore, float, float]:
        """Embed in batches of EMBEDDING_BATCH_SIZE, insert into a fresh collection: nothing else.

        The rows are the pipeline's: vector and the embedded text (which the collection's BM25
        function tokenizes on insert). Also timed, for reference only: the same vectors without
        their text (the baseline before hybrid search)."""
        raw = VectorStore(
            uri=settings.MILVUS_URI, collection=f"bench_raw_{label}", index_type=settings.MILVUS_INDEX_TYPE
        )
        plain = VectorStore(
            uri=settings.MILVUS_URI, collection=f"bench_plain_{label}", index_type=settings.MILVUS_INDEX_TYPE
        )
        for store_ in (raw, plain):
            store_.drop()
            store_.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
        cpu_started = time.process_time()
        started = time.perf_counter()
        vectors = embedder.encode([r[4] for r in raw_rows], batch_size=settings.EMBEDDING_BATCH_SIZE)
        embed_s = time.perf_counter() - started
        started = time.perf_counter()
        raw.upsert(
            [
                ChunkVector(r[0], v.tolist(), r[1], r[2], r[3], text=r[4])
                for r, v in zip(raw_rows, vectors, strict=True)
            ]
        )
        insert_s = time.perf_counter() - started
        cpu_s = time.process_time() - cpu_started
        assert raw.count() == len(raw_rows)
        started = time.perf_counter()
        plain.upsert(
            [ChunkVector(r[0], v.tolist(), r[1], r[2], r[3]) for r, v in zip(raw_rows, vectors, strict=True)]
        )
        plain_s = time.perf_counter() - started
        plain.drop()
        return embed_s, insert_s, raw, plain_s, cpu_s

    # Warm what either side would otherwise pay once per process: Milvus's BM25 analyzer (jieba),
    # where the collection has one, loads on the first text inserted...
    warm = VectorStore(
        uri=settings.MILVUS_URI, collection="bench_warm", index_type=settings.MILVUS_INDEX_TYPE
    )
    warm.drop()
    warm.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
    warm.upsert(
        [ChunkVector("w#0", embedder.encode(["预热 warm up"])[0].tolist(), "w", "w", 0, text="预热 warm up")]
    )
    warm.drop()
    # ... and the lexical index's analyser (jieba's dictionary), which the pipeline alone uses.
    from knowledge.lexical import analyse, get_lexical_engine

    analyse("预热 warm up")
    get_lexical_engine()

    # The machine may be shared: raw runs before and after the pipeline, their mean is the baseline.
    before = raw_run("before")
    before[2].drop()

    # --- the pipeline ------------------------------------------------------------------------
    stages = {
        "ingest_s": 0.0,
        "chunk_s": 0.0,
        "embed_s": 0.0,
        "upsert_s": 0.0,
        "commit_s": 0.0,
        "prune_s": 0.0,
    }
    #: the parts of a stage ("upsert.lexical_write_s"), printed under it, already counted in it
    parts: dict[str, float] = defaultdict(float)

    def add_timings(timings: dict[str, float]) -> None:
        for key, value in timings.items():
            (parts if "." in key else stages)[key] += value

    if args.worker:
        worker_log = folder / "worker.log"
        env = {**os.environ, "CELERY_TASK_ALWAYS_EAGER": "false"}
        if args.embedder == "model":
            command = [
                str(Path(sys.executable).parent / "celery"),
                "-A",
                "config",
                "worker",
                *_worker_options(args),
            ]
        else:
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--celery-worker",
                "--embedder",
                args.embedder,
                "--concurrency",
                str(args.concurrency),
            ]
        processes.append(
            subprocess.Popen(
                command,
                cwd=REPO, env=env, stdout=open(worker_log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            )
        )  # fmt: skip
        # Let the worker start, and every pool process load the embedder on a document of its
        # own (handed out together, each goes to a free process), before timing.
        for k in range(args.concurrency):
            document_ingest(
                data=f"---\ndomain: warmup\n---\n# warm up {k}\n\ntext".encode(), name=f"warmup-{k}.md"
            )
        deadline = time.monotonic() + 180
        while ApiDocument.objects.filter(doc_key__startswith="warmup-").exclude(status="INDEXED").exists():
            if time.monotonic() > deadline:
                sys.exit("the worker did not index the warm-up documents:\n" + worker_log.read_text())
            time.sleep(0.2)
        started = time.perf_counter()
        t = time.perf_counter()
        items_ingest(items=[UploadItem(n, d) for n, d in documents])  # the bulk path: batch tasks
        stages["ingest_s"] += time.perf_counter() - t
        while ApiDocument.objects.exclude(status__in=["INDEXED", "FAILED"]).exists():
            time.sleep(0.05)
        pipeline_s = time.perf_counter() - started
        for key in ("chunk_s", "embed_s", "upsert_s", "commit_s", "prune_s"):
            stages.pop(key)
    elif args.per_document:
        cpu_started = time.process_time()
        started = time.perf_counter()
        for name, data in documents:
            t = time.perf_counter()
            result = document_ingest(data=data, name=name)
            stages["ingest_s"] += time.perf_counter() - t
            outcome = document_index(document_id=result.document.id)
            add_timings(outcome.timings)
        pipeline_s = time.perf_counter() - started
        pipeline_cpu_s = time.process_time() - cpu_started
    else:
        # What items_ingest does, with the batch tasks it would queue run here, as the worker would.
        cpu_started = time.process_time()
        started = time.perf_counter()
        queue = IndexQueue()
        t = time.perf_counter()
        _stored_as_items_ingest_does(documents, queue)
        queue.domains_refresh()  # what sending the queue does first: each changed domain once
        stages["ingest_s"] += time.perf_counter() - t
        for batch in index_batches((i, False) for i in queue.document_ids):
            outcome = documents_index(entries=batch, final_attempt=True)
            add_timings(outcome.timings)
        pipeline_s = time.perf_counter() - started
        pipeline_cpu_s = time.process_time() - cpu_started

    after = raw_run("after")
    raw_embed_s = (before[0] + after[0]) / 2
    raw_insert_s = (before[1] + after[1]) / 2
    raw_s = raw_embed_s + raw_insert_s
    plain_insert_s = (before[3] + after[3]) / 2
    raw_cpu_s = (before[4] + after[4]) / 2

    bench_docs = ApiDocument.objects.exclude(doc_key__startswith="warmup-")
    failed = bench_docs.filter(status="FAILED").count()
    n_docs = bench_docs.count()
    n_chunks = DocumentChunk.objects.filter(document__in=bench_docs).count()
    stored = store.count() - (args.concurrency if args.worker else 0)
    # Same texts, same model: the pipeline must have stored what the raw run did (a check, not a timing).
    sample = [r[0] for r in raw_rows[:: max(1, len(raw_rows) // 20)]]
    pipe_v, raw_v = store.vectors(sample), after[2].vectors(sample)
    same = n_chunks == len(raw_rows) and all(np.allclose(pipe_v[i], raw_v[i], atol=1e-4) for i in sample)
    after[2].drop()
    after[2].reset()

    # --- report ------------------------------------------------------------------------------
    if args.worker:
        mode = f"real Celery worker, concurrency {args.concurrency} (filesystem broker, milvus-lite server)"
    elif args.per_document:
        mode = "in-process, a run per document"
    else:
        mode = f"in-process, batches of {settings.INGEST_INDEX_BATCH_DOCUMENTS} documents"
    print(
        f"\n  documents   {n_docs} ({failed} failed), chunks {n_chunks} ({n_chunks / max(n_docs, 1):.1f} per document)"
    )
    print(
        f"  vectors     {stored} in the pipeline's collection; same chunks and sampled vectors as raw: {same}"
    )
    print(f"\n  {'':26}{'seconds':>9}{'docs/s':>10}{'chunks/s':>10}")
    print(
        f"  {'pipeline (' + ('worker' if args.worker else 'per document' if args.per_document else 'in-process') + ')':26}{pipeline_s:9.2f}{n_docs / pipeline_s:10.1f}{n_chunks / pipeline_s:10.1f}"
    )
    print(
        f"  {'raw embed + insert':26}{raw_s:9.2f}{n_docs / raw_s:10.1f}{n_chunks / raw_s:10.1f}"
        f"   (mean of {before[0] + before[1]:.2f} s before and {after[0] + after[1]:.2f} s after)"
    )
    print(f"    {'of which embed':24}{raw_embed_s:9.2f}")
    print(f"    {'of which insert':24}{raw_insert_s:9.2f}   (rows with their text, as the pipeline writes)")
    plain_s = raw_embed_s + plain_insert_s
    print(
        f"  {'raw, vectors without text':26}{plain_s:9.2f}{n_docs / plain_s:10.1f}{n_chunks / plain_s:10.1f}"
        f"   (reference: insert {plain_insert_s:.2f} s; pipeline / this = {pipeline_s / plain_s:.2f})"
    )
    print(
        f"\n  ratio       pipeline time / raw time = {pipeline_s / raw_s:.2f}  "
        f"(pipeline throughput = {raw_s / pipeline_s:.0%} of raw)"
    )
    if not args.worker:
        # CPU seconds of this process (every thread: the embedder's, milvus-lite's): the same
        # ratio counted in work done, which other load on a shared machine disturbs far less.
        print(
            f"              pipeline CPU time / raw CPU time = {pipeline_cpu_s / raw_cpu_s:.2f}  "
            f"({pipeline_cpu_s:.2f} s against {raw_cpu_s:.2f} s)"
        )
    if args.lexical_compare:
        _lexical_compare(documents, store, embedder)
    print(f"\n  pipeline stages ({mode}), seconds in total:")
    for key, value in stages.items():
        print(f"    {key[:-2]:10}{value:8.2f}  ({value / pipeline_s:.0%})")
    if args.worker:
        print(f"    {'in all':10}{pipeline_s / max(n_chunks, 1) * 1e6:8.1f} µs a chunk ({n_chunks} chunks)")
    else:
        other = pipeline_s - sum(stages.values())
        print(f"    {'other':10}{other:8.2f}  ({other / pipeline_s:.0%})  (locks, status updates, hooks)")
        print(f"\n  microseconds per chunk ({n_chunks} chunks, {settings.MILVUS_URI}):")
        for key, value in [*stages.items(), ("other_s", other), ("total_s", pipeline_s)]:
            print(f"    {key[:-2]:10}{value / max(n_chunks, 1) * 1e6:10.1f}")
            for part, seconds in parts.items():
                if part.startswith(key[:-2] + "."):
                    label = "of which " + part.split(".", 1)[1][:-2].replace("_", " ")
                    print(f"      {label:26}{seconds / max(n_chunks, 1) * 1e6:8.1f}")
        if args.embedder == "null":
            own = (pipeline_s - stages["embed_s"]) / max(n_chunks, 1)
            projected = 1_000_000 * (own + 1 / GPU_CHUNKS_PER_S)
            print(
                f"    pipeline's own work {own * 1e6:.1f} µs a chunk; 1,000,000 chunks at {GPU_CHUNKS_PER_S:,.0f} "
                f"chunks/s of GPU embedding: {projected / 60:.1f} min serial ({1_000_000 / GPU_CHUNKS_PER_S / 60:.1f} "
                "min of it embedding)"
            )
        if args.embedder == "gpu":
            per_chunk = pipeline_s / max(n_chunks, 1)
            print(
                f"    with embedding at GPU speed ({GPU_CHUNKS_PER_S:,.0f} chunks/s, {1e6 / GPU_CHUNKS_PER_S:.0f} µs "
                f"a chunk): {per_chunk * 1e6:.1f} µs a chunk in all, the pipeline adding "
                f"{(per_chunk - 1 / GPU_CHUNKS_PER_S) * 1e6:.1f}; 1,000,000 chunks: {per_chunk * 1e6 / 60:.1f} min"
            )


def _worker_options(args) -> list[str]:
    return [
        "--concurrency",
        str(args.concurrency),
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        "WARNING",
    ]


def _celery_worker(args) -> None:
    """The Celery worker of ``--worker`` with a stand-in embedder, set before the pool forks."""
    import django

    django.setup()
    from config.celery import app
    from knowledge.embeddings import registry
    from knowledge.services import vectors

    embedder = NullEmbedder() if args.embedder == "null" else SimulatedGpuEmbedder()
    registry._embedder = embedder
    # the worker's start-up check compares the collection with what the settings would load
    vectors.embedding_signature = lambda: (embedder.model_name, embedder.dim)
    app.worker_main(["worker", *_worker_options(args)])


def _stored_as_items_ingest_does(documents: list[tuple[str, bytes]], queue) -> None:
    """The files stored as ``items_ingest`` stores them (groups of new documents written
    together), into the bench's own queue: its documents are then indexed here."""
    from knowledge.services.documents import IngestFile, documents_ingest
    from knowledge.services.uploads import INGEST_GROUP_FILES

    for start in range(0, len(documents), INGEST_GROUP_FILES):
        group = documents[start : start + INGEST_GROUP_FILES]
        documents_ingest(files=[IngestFile(data=data, name=name) for name, data in group], index_queue=queue)


class NullEmbedder:
    """Fixed unit vectors at no cost: what is left in the figures is the pipeline's own work."""

    model_name = "null-fixed-unit"
    dim = 512

    def __init__(self) -> None:
        import numpy as np

        self._row = np.zeros(self.dim, dtype=np.float32)
        self._row[0] = 1.0

    def encode(self, texts: list[str], *, batch_size: int = 32):
        import numpy as np

        return np.broadcast_to(self._row, (len(texts), self.dim))

    def encode_one(self, text: str):
        return self._row


class SimulatedGpuEmbedder(NullEmbedder):
    """NullEmbedder's vectors, each batch taking as long as a GPU would embed it. It sleeps, so the
    pipeline's other threads (the lexical analysis) run meanwhile, as they do beside a GPU."""

    model_name = "null-fixed-unit"  # the same collection as --embedder null

    def encode(self, texts: list[str], *, batch_size: int = 32):
        time.sleep(len(texts) / GPU_CHUNKS_PER_S)
        return super().encode(texts, batch_size=batch_size)


class _NoLexicalIndex:
    """A lexical engine that keeps nothing: the pipeline as it ran before the lexical index."""

    name = "none"
    separate = False

    def documents_replace(self, chunks_by_doc) -> None:
        return

    def documents_delete(self, doc_keys) -> None:
        return


def _lexical_compare(documents, store, embedder) -> None:
    """The in-process batch pipeline on emptied stores, without the lexical index and with it,
    in the order without, with, with, without (a shared machine drifts: the means compare)."""
    from knowledge.lexical import choice, get_lexical_engine
    from knowledge.models import ApiDocument
    from knowledge.services.index_queue import IndexQueue, index_batches
    from knowledge.services.indexing import documents_index

    lexical = get_lexical_engine()

    def one_run(engine) -> float:
        doc_keys = list(ApiDocument.objects.values_list("doc_key", flat=True))
        lexical.documents_delete(doc_keys)
        ApiDocument.objects.all().delete()
        store.drop()
        store.ensure_collection(dim=embedder.dim, model_name=embedder.model_name)
        saved, choice._engine = choice._engine, engine
        try:
            started = time.perf_counter()
            queue = IndexQueue()
            _stored_as_items_ingest_does(documents, queue)
            queue.domains_refresh()
            for batch in index_batches((i, False) for i in queue.document_ids):
                documents_index(entries=batch, final_attempt=True)
            return time.perf_counter() - started
        finally:
            choice._engine = saved

    runs: dict[str, list[float]] = {"without": [], "with": []}
    for label in ("without", "with", "with", "without"):
        runs[label].append(one_run(_NoLexicalIndex() if label == "without" else lexical))
    without, with_ = (sum(runs[k]) / len(runs[k]) for k in ("without", "with"))
    print(
        f"\n  lexical index ({lexical.name}): pipeline {with_:.2f} s with it, {without:.2f} s without "
        f"(runs: with {', '.join(f'{s:.2f}' for s in runs['with'])}; "
        f"without {', '.join(f'{s:.2f}' for s in runs['without'])})"
    )
    print(f"              throughput with / without = {without / with_:.2f}  (target >= 0.95)")


if __name__ == "__main__":
    main()
