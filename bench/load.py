"""Load: lookup_knowledge under concurrent agents against gunicorn with several workers on
MariaDB + Redis + a loopback milvus-lite server, for a bounded time; then the action memory is
checked for consistency across the workers.

The benchmark builds a throw-away agentkb: a MariaDB database of its own (dropped afterwards),
a Redis database number (only this run's session keys are read; nothing is flushed), a
``milvus-lite server`` in a temporary folder, the demo knowledge base (knowledge/demo_corpus,
indexed in this process), one agent token per client, and ``gunicorn config.wsgi`` with
``--workers`` sync workers under production settings (DEBUG off). Then ``--clients`` threads
post lookups for ``--duration`` seconds, each request a new connection (gunicorn's sync workers
do not keep connections alive), drawing sessions from a shared pool so one session's lookups
land on different workers, some at the same moment.

Afterwards, for every session: the (domain, doc key) pairs in Redis must equal the union of
what the responses returned, and the union of what the recorded invocations say they returned.

    .venv/bin/python bench/load.py                                  # 60 s, 4 workers, 8 clients
    .venv/bin/python bench/load.py --duration 20 --workers 2 --clients 4

Needs MariaDB on 127.0.0.1:3306 (root, no password) and Redis on 127.0.0.1:6379, as the
service-backed test run does. Nothing is asserted: the figures are printed (exit 1 on errors or
an inconsistent session, so a script can tell).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.processes import free_port, stop, wait_for_port  # noqa: E402

BIN = Path(sys.executable).parent
DEMO_CORPUS = REPO / "knowledge" / "demo_corpus"

QUERIES = [
    "ERR_TIMEOUT",
    "ERR_AUTH_EXPIRED",
    "错误码说明",
    "数据库连接池配置",
    "HikariCP 参数怎么调",
    "Redis 缓存集群",
    "支付回调签名校验",
    "支付失败怎么排查",
    "退款多久到账",
    "JVM 内存泄漏排查",
    "发布后服务 503",
    "接口响应慢",
    "令牌过期怎么办",
    "连接池耗尽",
    "缓存穿透",
    "量子计算入门",  # nothing: a miss is part of the traffic
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def mysql(sql: str) -> None:
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="root", port=3306)
    try:
        conn.cursor().execute(sql)
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn sync workers (default 4)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent client threads (default 8)")
    parser.add_argument("--sessions", type=int, default=60, help="agent sessions shared by the clients")
    parser.add_argument("--redis-db", type=int, default=12, help="Redis database number (default 12)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and database")
    args = parser.parse_args()

    run_id = uuid.uuid4().hex[:8]
    work = Path(tempfile.mkdtemp(prefix="agentkb-load-"))
    db_name = f"agentkb_load_{run_id}"
    milvus_port, web_port = free_port(), free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "false",  # loopback HTTP
        "DATABASE_URL": f"mysql://root@127.0.0.1:3306/{db_name}",
        "REDIS_URL": f"redis://127.0.0.1:6379/{args.redis_db}",
        "MILVUS_URI": f"http://127.0.0.1:{milvus_port}",
        "MILVUS_COLLECTION": f"load_{run_id}",
        "AGENTKB_VAR_DIR": str(work / "var"),
        "API_THROTTLE_TOOL": "1000000/min",  # measuring the service, not the throttle
        "LOG_LEVEL": "WARNING",
    }
    env.pop("DEBUG", None)
    milvus = web = None
    mysql(f"CREATE DATABASE `{db_name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    try:
        milvus = subprocess.Popen(
            [
                str(BIN / "milvus-lite"),
                "server",
                "--data-dir",
                str(work / "milvus"),
                "--host",
                "127.0.0.1",
                "--port",
                str(milvus_port),
            ],
            stdout=open(work / "milvus.log", "wb"),  # noqa: SIM115 - the child holds it
            stderr=subprocess.STDOUT,
        )
        wait_for_port(milvus_port, milvus)

        # This process shares the environment: it loads the corpus and checks the results.
        os.environ.update(env)
        os.environ["CELERY_TASK_ALWAYS_EAGER"] = "true"  # index the demo corpus here, now
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from knowledge.models import ApiDocument
        from knowledge.services.uploads import folder_items, items_ingest
        from retrieval.agents.tokens import tool_token_issue

        started = time.perf_counter()
        items_ingest(items=folder_items([DEMO_CORPUS]))
        indexed = ApiDocument.objects.filter(status="INDEXED").count()
        print(f"demo corpus: {indexed} documents indexed in {time.perf_counter() - started:.1f}s")
        tokens = [tool_token_issue(name=f"load-{run_id}-{i}").key for i in range(args.clients)]

        web_env = {**env, "CELERY_TASK_ALWAYS_EAGER": "false"}
        web = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "config.wsgi",
                "--workers",
                str(args.workers),
                "--bind",
                f"127.0.0.1:{web_port}",
                "--timeout",
                "60",
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            env=web_env,
            stdout=open(work / "web.log", "wb"),  # noqa: SIM115 - the child holds it
            stderr=subprocess.STDOUT,
        )
        wait_for_port(web_port, web)
        sessions = [f"load-{run_id}-s{i}" for i in range(args.sessions)]
        body = _run_load(args, web_port, tokens, sessions)
        return _report(args, body, sessions, work)
    finally:
        stop(web)
        stop(milvus)
        if not args.keep:
            mysql(f"DROP DATABASE IF EXISTS `{db_name}`")
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept: {work} and database {db_name}")


def _run_load(args, port: int, tokens: list[str], sessions: list[str]) -> dict:
    latencies: list[float] = []
    statuses: Counter = Counter()
    returned: dict[str, set[tuple[str, str]]] = defaultdict(set)
    lock = threading.Lock()

    # Warm every worker (model load, first Milvus connection) before the clock starts.
    for _ in range(args.workers * 3):
        _post(port, tokens[0], {"query": "ERR_TIMEOUT", "session_id": f"warm-{uuid.uuid4().hex}"})
    stop_at = time.monotonic() + args.duration

    def client(index: int) -> None:
        rng = random.Random(index)
        token = tokens[index]
        while time.monotonic() < stop_at:
            session = rng.choice(sessions)
            payload = {"query": rng.choice(QUERIES), "session_id": session}
            t = time.perf_counter()
            try:
                status, data = _post(port, token, payload)
            except OSError as exc:
                status, data = f"connection error: {exc}", None
            elapsed = (time.perf_counter() - t) * 1000
            with lock:
                latencies.append(elapsed)
                statuses[status] += 1
                if status == 200:
                    for item in [data["primary"], *data["supplement"]] if data["primary"] else []:
                        returned[session].add((item["domain"], item["docKey"]))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    wall = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall
    return {
        "latencies": latencies,
        "statuses": statuses,
        "returned": returned,
        "wall": wall,
    }


def _post(port: int, token: str, payload: dict) -> tuple[int, dict | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(
            "POST",
            "/api/tools/lookup_knowledge",
            body=json.dumps(payload),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        raw = response.read()
        return response.status, (json.loads(raw) if response.status == 200 else None)
    finally:
        conn.close()


def _report(args, result: dict, sessions: list[str], work: Path) -> int:
    from observability.models import ToolInvocation
    from retrieval.agents.tracker import get_tracker

    latencies, statuses = result["latencies"], result["statuses"]
    total = sum(statuses.values())
    errors = total - statuses.get(200, 0)
    recorded: dict[str, set[tuple[str, str]]] = defaultdict(set)
    invocation_statuses: Counter = Counter()
    for session_id, status, details in ToolInvocation.objects.filter(session_id__in=sessions).values_list(
        "session_id", "status", "retrieval_details"
    ):
        invocation_statuses[status] += 1
        recorded[session_id] |= set(
            zip(details["returned_domains"], details["returned_doc_keys"], strict=True)
        )

    tracker = get_tracker()
    inconsistent = []
    for session in sessions:
        memory = tracker.snapshot(session)
        in_redis = {(domain, doc) for domain, docs in memory.domains.items() for doc in docs}
        if not (in_redis == result["returned"][session] == recorded[session]):
            inconsistent.append(session)
    marked = sum(len(result["returned"][s]) for s in sessions)

    print()
    print(
        f"load: {args.clients} clients -> gunicorn {args.workers} sync workers, {args.duration:.0f}s, "
        f"{len(sessions)} shared sessions, {len(QUERIES)} queries"
    )
    print(f"  requests        {total}  ({total / result['wall']:.1f} req/s)")
    print(
        f"  latency ms      p50 {pct(latencies, 50):.1f}  p95 {pct(latencies, 95):.1f}  "
        f"p99 {pct(latencies, 99):.1f}  max {max(latencies):.1f}  mean {statistics.fmean(latencies):.1f}"
    )
    print(f"  HTTP statuses   {dict(statuses)}  errors {errors}")
    print(f"  invocations     {dict(invocation_statuses)} recorded for these sessions")
    print(
        f"  action memory   {len(sessions) - len(inconsistent)}/{len(sessions)} sessions consistent "
        f"(Redis == union of responses == union of recorded invocations; {marked} documents marked)"
    )
    if inconsistent:
        print(f"  INCONSISTENT    {inconsistent[:10]}  (logs in {work})")
    return 1 if errors or inconsistent or invocation_statuses.get("ERROR") else 0


if __name__ == "__main__":
    sys.exit(main())
