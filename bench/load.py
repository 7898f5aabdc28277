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
    .venv/bin/python bench/load.py --two-agents                     # a victim beside a flooder

Two-agent mode (``--two-agents``): what one agent flooding at full speed costs another. The same
servers, plus ``uvicorn config.asgi`` (one process) for ``/mcp/``, as docs/integrations.md
deploys MCP beside gunicorn; every budget at its default (API_THROTTLE_TOOL 600/min within
API_THROTTLE_TOOL_BURST 20/s, API_THROTTLE_FAILED_AUTH 60/min). A victim agent paces its calls inside its budget: a REST lookup
and an MCP ``tools/call lookup_knowledge`` about three times a second each, every one in a fresh
session (a full lookup each time). It is timed alone, then while a flooder (a fresh agent each
phase, ``--flood-threads`` threads in a process of their own, so the client's GIL does not weigh
on the victim's timings) sends, as fast as the servers answer, REST lookups, MCP ``tools/list``
in an open session, or requests with wrong keys. One table: the victim's p50/p95 per phase, its
p50 against the alone phase, and what the flood got (requests/s and statuses).

Needs MariaDB on 127.0.0.1:3306 (root, no password) and Redis on 127.0.0.1:6379, as the
service-backed test run does. Nothing is asserted: the figures are printed (exit 1 on errors or
an inconsistent session, so a script can tell).
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import random
import resource
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
    parser.add_argument(
        "--two-agents", action="store_true", help="a paced victim agent, alone and beside a flooding one"
    )
    parser.add_argument(
        "--asgi",
        action="store_true",
        help="gunicorn with uvicorn workers over config.asgi (the production command; serves /mcp/ too)",
    )
    parser.add_argument("--phase-seconds", type=float, default=20.0, help="two-agent mode: seconds a phase")
    parser.add_argument("--flood-threads", type=int, default=8, help="two-agent mode: flooding threads")
    parser.add_argument(
        "--flood-nice",
        type=int,
        default=0,
        help="two-agent mode: lower the flooding process's CPU priority by this much (19: the "
        "flooder's own client costs this machine's cores nothing the servers need, as when it runs "
        "on its own machine)",
    )
    args = parser.parse_args()

    run_id = uuid.uuid4().hex[:8]
    work = Path(tempfile.mkdtemp(prefix="agentkb-load-"))
    db_name = f"agentkb_load_{run_id}"
    milvus_port, web_port, mcp_port = free_port(), free_port(), free_port()
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
        # Measuring the service, not the throttle; the two-agent mode measures both: defaults.
        "API_THROTTLE_TOOL": "600/min" if args.two_agents else "1000000/min",
        "API_THROTTLE_TOOL_BURST": "20/s" if args.two_agents else "",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("DEBUG", None)
    milvus = web = mcp = None
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
        issued = [tool_token_issue(name=f"load-{run_id}-{i}") for i in range(args.clients)]
        tokens = [token.key for token in issued]
        # The action memory is per agent: one client's token is one agent, whose sessions are
        # keyed by its user id (retrieval.agents.tracker.memory_session_key).
        agent_ids = {token.key: token.user.pk for token in issued}

        web_env = {**env, "CELERY_TASK_ALWAYS_EAGER": "false"}
        # --asgi: the documented production command (uvicorn workers over config.asgi, which
        # serves /mcp/ too); else sync workers over config.wsgi beside one uvicorn for /mcp/.
        app = (
            ["-c", "config/gunicorn_conf.py", "-k", "uvicorn_worker.UvicornWorker", "config.asgi:application"]
            if args.asgi
            else ["config.wsgi"]
        )
        web = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                *app,
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
        if args.two_agents and args.asgi:
            mcp_port = web_port
        elif args.two_agents:
            uvicorn = [str(BIN / "uvicorn"), "config.asgi:application", "--host", "127.0.0.1"]
            mcp = subprocess.Popen(
                [*uvicorn, "--port", str(mcp_port), "--log-level", "warning"],
                cwd=REPO,
                env=web_env,
                stdout=open(work / "mcp.log", "wb"),  # noqa: SIM115 - the child holds it
                stderr=subprocess.STDOUT,
            )
            wait_for_port(mcp_port, mcp)
        if args.two_agents:
            keys = [
                tool_token_issue(name=f"load-{run_id}-{role}").key for role in ("warm", "victim", *FLOODS)
            ]
            servers = [p.pid for p in (web, mcp, milvus) if p is not None]
            rows = _run_two_agents(
                args, web_port, mcp_port, warm=keys[0], victim=keys[1], flooders=keys[2:], servers=servers
            )
            return _report_two_agents(args, rows, keys[1])
        sessions = [f"load-{run_id}-s{i}" for i in range(args.sessions)]
        body = _run_load(args, web_port, tokens, sessions)
        return _report(args, body, sessions, work, agent_ids)
    finally:
        stop(mcp)
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
    # per (token, session): each client is its own agent, and agents share no session
    returned: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
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
                        returned[(token, session)].add((item["domain"], item["docKey"]))

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


def _report(args, result: dict, sessions: list[str], work: Path, agent_ids: dict[str, int]) -> int:
    from observability.models import ToolInvocation
    from retrieval.agents.tracker import get_tracker
    from retrieval.agents.tracker.base import memory_session_key

    latencies, statuses = result["latencies"], result["statuses"]
    total = sum(statuses.values())
    errors = total - statuses.get(200, 0)
    recorded: dict[tuple[int, str], set[tuple[str, str]]] = defaultdict(set)
    invocation_statuses: Counter = Counter()
    for agent_id, session_id, status, details in ToolInvocation.objects.filter(
        session_id__in=sessions
    ).values_list("agent_id", "session_id", "status", "retrieval_details"):
        invocation_statuses[status] += 1
        recorded[(agent_id, session_id)] |= set(
            zip(details["returned_domains"], details["returned_doc_keys"], strict=True)
        )

    tracker = get_tracker()
    inconsistent = []
    pairs = [(token, session) for token in agent_ids for session in sessions]
    for token, session in pairs:
        agent_id = agent_ids[token]
        key = memory_session_key(agent_id=agent_id, agent="", session_id=session)
        memory = tracker.snapshot(key)
        in_redis = {(domain, doc) for domain, docs in memory.domains.items() for doc in docs}
        if not (in_redis == result["returned"][(token, session)] == recorded[(agent_id, session)]):
            inconsistent.append(f"agent {agent_id} / {session}")
    marked = sum(len(found) for found in result["returned"].values())

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
        f"  action memory   {len(pairs) - len(inconsistent)}/{len(pairs)} (agent, session) pairs consistent "
        f"(Redis == union of responses == union of recorded invocations; {marked} documents marked)"
    )
    if inconsistent:
        print(f"  INCONSISTENT    {inconsistent[:10]}  (logs in {work})")
    return 1 if errors or inconsistent or invocation_statuses.get("ERROR") else 0


# --- two agents: a victim beside a flooder ---------------------------------------------------------------
FLOODS = ("rest-lookup", "mcp-tools-list", "bad-token")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VICTIM_PACE_S = 0.33  # per transport: about 360 calls a minute in all, inside the 600/min budget
_ids = itertools.count(10)  # JSON-RPC ids: unique among a session's requests in flight


def _request(
    port: int, method: str, path: str, key: str, body: dict | None = None, **headers
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(
            method,
            path,
            body=None if body is None else json.dumps(body),
            headers={"Authorization": f"Token {key}", "Content-Type": "application/json", **headers},
        )
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _mcp_session(port: int, key: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        opening = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "load", "version": "1"},
            },
        }
        conn.request(
            "POST",
            "/mcp/",
            body=json.dumps(opening),
            headers={"Authorization": f"Token {key}", **MCP_HEADERS},
        )
        response = conn.getresponse()
        response.read()
        session = response.getheader("mcp-session-id")
    finally:
        conn.close()
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    _request(port, "POST", "/mcp/", key, note, **MCP_HEADERS, **{"Mcp-Session-Id": session})
    return session


def _flood(
    kind: str, web_port: int, mcp_port: int, key: str, seconds: float, threads: int, nice: int = 0
) -> dict:
    """Run in a process of its own: ``threads`` threads sending ``kind`` as fast as answered.
    ``nice``: this process's CPU priority lowered by that much (--flood-nice)."""
    if nice:
        os.nice(nice)
    session = _mcp_session(mcp_port, key) if kind == "mcp-tools-list" else None
    statuses: Counter = Counter()
    samples: dict = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def one() -> tuple[int, bytes]:
        if kind == "rest-lookup":
            # One-off queries (a known one plus a fresh word): each misses the query-vector and
            # search-hit caches and offers them a new key, the flood that would push out the
            # victim's entries from a plain LRU.
            query = f"{random.choice(QUERIES)} {uuid.uuid4().hex[:8]}"
            payload = {"query": query, "session_id": f"flood-{uuid.uuid4().hex}"}
            return _request(web_port, "POST", "/api/tools/lookup_knowledge", key, payload)
        if kind == "mcp-tools-list":
            listing = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/list"}
            return _request(
                mcp_port, "POST", "/mcp/", key, listing, **MCP_HEADERS, **{"Mcp-Session-Id": session}
            )
        wrong = secrets.token_hex(20)  # a wrong key each time: nothing to learn from a cache
        return _request(
            web_port, "POST", "/api/tools/lookup_knowledge", wrong, {"query": "x", "session_id": "s"}
        )

    def loop() -> None:
        while time.monotonic() < stop_at:
            try:
                status, body = one()
            except OSError as exc:
                status, body = "connection error", str(exc).encode()
            with lock:
                statuses[status] += 1
                # What a server error said (the first of each status), to explain it
                if (status == "connection error" or status >= 500) and status not in samples:
                    samples[status] = body[:300].decode(errors="replace")

    started = time.perf_counter()
    pool = [threading.Thread(target=loop) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "statuses": dict(statuses),
        "samples": samples,
        "seconds": time.perf_counter() - started,
        "client_cpu": usage.ru_utime + usage.ru_stime,
    }


def _victim(web_port: int, mcp_port: int, key: str, session: str, seconds: float) -> dict:
    """Paced REST and MCP lookups (a thread each), timed."""
    timings: dict[str, list[float]] = {"rest": [], "mcp": []}
    errors: Counter = Counter()
    stop_at = time.monotonic() + seconds

    def call(transport: str) -> tuple[int, bytes]:
        query = {"query": random.choice(QUERIES), "session_id": f"victim-{uuid.uuid4().hex}"}
        if transport == "rest":
            return _request(web_port, "POST", "/api/tools/lookup_knowledge", key, query)
        lookup = {
            "jsonrpc": "2.0",
            "id": next(_ids),
            "method": "tools/call",
            "params": {"name": "lookup_knowledge", "arguments": query},
        }
        return _request(mcp_port, "POST", "/mcp/", key, lookup, **MCP_HEADERS, **{"Mcp-Session-Id": session})

    def paced(transport: str) -> None:
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            try:
                status, body = call(transport)
            except OSError:
                status, body = "connection error", b""
            elapsed = time.perf_counter() - started
            if status == 200 and b'"isError":true' not in body:
                timings[transport].append(elapsed * 1000)
            else:
                errors[f"{transport} {status}"] += 1
            time.sleep(max(0.0, VICTIM_PACE_S - elapsed))

    pool = [threading.Thread(target=paced, args=(t,)) for t in timings]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return {"timings": timings, "errors": dict(errors)}


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes and their children (gunicorn's workers), from /proc."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    seen = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except (OSError, IndexError, ValueError):
            continue
    return total


def _now():
    from django.utils import timezone

    return timezone.now()


def _victim_cache_hits(victim: str, window) -> str:
    """The share of the victim's lookups in ``window`` whose search hits came from the cache
    (``l1_cached`` in each call's record): its own queries, asked again and again, should stay
    cached however many one-off queries the flooder sends."""
    from observability.models import ToolInvocation
    from retrieval.agents.tokens import token_lookup

    agent = token_lookup(victim).user
    cached = [
        (bool(details.get("l1_cached")), bool(details.get("query_vector_cached")))
        for details in ToolInvocation.objects.filter(
            agent=agent, created_at__gte=window[0], created_at__lte=window[1]
        ).values_list("retrieval_details", flat=True)
        if details
    ]
    if not cached:
        return "n/a"
    hits, vectors = (100 * sum(c[i] for c in cached) / len(cached) for i in (0, 1))
    return f"{hits:.0f}% / {vectors:.0f}% of {len(cached)}"


def _run_two_agents(
    args, web_port: int, mcp_port: int, *, warm: str, victim: str, flooders: list[str], servers: list[int]
) -> list[dict]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    session = _mcp_session(mcp_port, victim)
    # Warm every worker and the MCP process (model load, first Milvus connection), unclocked.
    for _ in range(args.workers * 3):
        warming = {"query": "ERR_TIMEOUT", "session_id": uuid.uuid4().hex}
        _request(web_port, "POST", "/api/tools/lookup_knowledge", warm, warming)
    _victim(web_port, mcp_port, victim, session, 3.0)

    before, started = _cpu_seconds(servers), _now()
    alone = _victim(web_port, mcp_port, victim, session, args.phase_seconds)
    server_cpu = _cpu_seconds(servers) - before
    rows = [{"phase": "alone", **alone, "flood": None, "server_cpu": server_cpu, "window": (started, _now())}]
    spawn = multiprocessing.get_context("spawn")  # not fork: this process holds torch's threads
    for kind, key in zip(FLOODS, flooders, strict=True):
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            # Give the flood a second's head start so the victim is timed under it from its first call.
            flood = pool.submit(
                _flood,
                kind,
                web_port,
                mcp_port,
                key,
                args.phase_seconds + 2,
                args.flood_threads,
                args.flood_nice,
            )
            before = _cpu_seconds(servers)
            time.sleep(1.0)
            started = _now()
            timed = _victim(web_port, mcp_port, victim, session, args.phase_seconds)
            window = (started, _now())
            result = flood.result()
            server_cpu = _cpu_seconds(servers) - before
            rows.append(
                {
                    "phase": f"flood: {kind}",
                    **timed,
                    "flood": result,
                    "server_cpu": server_cpu,
                    "window": window,
                }
            )
        time.sleep(2.0)  # let the servers drain before the next phase
    return rows


def _report_two_agents(args, rows: list[dict], victim: str) -> int:
    time.sleep(2.0)  # the last calls' records are written after their answers
    for row in rows:
        row["cache_hits"] = _victim_cache_hits(victim, row["window"])
    print()
    print(
        f"two agents: gunicorn {args.workers} "
        + ("uvicorn workers (REST and MCP)" if args.asgi else "sync workers (REST) + uvicorn (MCP)")
        + " on MariaDB + Redis; "
        f"victim paced every {VICTIM_PACE_S:.2f}s per transport, {args.phase_seconds:.0f}s a phase, "
        f"flooder {args.flood_threads} threads in its own process"
        + (f" at nice {args.flood_nice}" if args.flood_nice else "")
        + "; budgets 600/min (at most 20/s) per agent, "
        "60/min wrong keys per address"
    )
    alone = {t: pct(rows[0]["timings"][t], 50) for t in ("rest", "mcp")}
    header = (
        f"| {'phase':22} | {'victim REST p50 / p95 ms':>24} | {'x alone':>7} | {'victim MCP p50 / p95 ms':>23} "
        f"| {'x alone':>7} | {'victim errors':>13} | {'flood req/s':>11} | {'server CPU s':>12} "
        f"| {'flooder CPU s':>13} | {'victim hits / vectors cached':>28} | flood answers |"
    )
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    worst = 0.0
    for row in rows:
        cells = []
        for transport in ("rest", "mcp"):
            values = row["timings"][transport]
            p50, p95 = pct(values, 50), pct(values, 95)
            ratio = p50 / alone[transport]
            worst = max(worst, ratio)
            cells += [f"{p50:8.1f} / {p95:8.1f} (n={len(values):3d})", f"{ratio:6.2f}x"]
        flood = row["flood"]
        rate = "" if flood is None else f"{sum(flood['statuses'].values()) / flood['seconds']:.0f}"
        answers = (
            ""
            if flood is None
            else ", ".join(f"{k}: {v}" for k, v in sorted(flood["statuses"].items(), key=str))
        )
        errors = sum(row["errors"].values())
        client_cpu = "" if flood is None else f"{flood['client_cpu']:.1f}"
        print(
            f"| {row['phase']:22} | {cells[0]:>24} | {cells[1]:>7} | {cells[2]:>23} | {cells[3]:>7} "
            f"| {errors:>13} | {rate:>11} | {row['server_cpu']:12.1f} | {client_cpu:>13} "
            f"| {row['cache_hits']:>28} | {answers} |"
        )
    for row in rows:
        for status, body in ((row["flood"] or {}).get("samples") or {}).items():
            print(f"  {row['phase']}: first {status} answer: {body}")
    cores = os.cpu_count()
    print(
        f"worst victim p50 under a flood: {worst:.2f}x its p50 alone (target: at most 2x); "
        f"{cores} CPU cores on this machine, shared by the servers, the victim and the flooder"
    )
    return 1 if any(row["errors"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
