"""What each integration costs on top of the lookup itself: REST, MCP (streamable HTTP and stdio)
and the Dify endpoint, against the same corpus and the same server.

Sets up a temporary agentkb (SQLite, a loopback ``milvus-lite server``, the demo knowledge base
indexed in-process), serves ``config.asgi`` with uvicorn in a thread (Django and ``/mcp/`` in one
process, as ``make run`` does), then times, client side, N calls of each:

- REST ``POST /api/tools/lookup_knowledge`` (httpx, one keep-alive connection);
- MCP ``lookup_knowledge`` over streamable HTTP (the SDK's client, one MCP session);
- MCP ``lookup_knowledge`` over stdio (the SDK's client starting ``manage.py mcp_server``);
- Dify ``POST /api/dify/retrieval`` (top_k 3, threshold 0).

Each lookup names its own session, so no call is withheld; queries cycle over the demo corpus's
topics, so after the first round the query vectors and L1 hits come from the per-process caches,
for every integration alike. The server-side duration of the same calls (``duration_ms`` of their
invocation records) is printed beside them: the difference is the transport. Also printed: the
time to open an MCP session (HTTP: initialize; stdio: start the process, django.setup, initialize).

    .venv/bin/python bench/integrations.py            # --calls 200
Prints figures only; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

QUERIES = [
    "数据库连接池配置",
    "HikariCP 参数",
    "Redis 缓存集群",
    "ERR_TIMEOUT",
    "令牌过期怎么办",
    "错误码说明",
    "接口响应慢",
    "发布后 503",
    "JVM 内存泄漏",
    "支付失败排查",
    "退款多久到账",
    "支付回调验签",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("process exited before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing on port {port}")


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"p50 {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms   mean {statistics.fmean(values):7.1f} ms"


def _server_ms(session_prefix: str, tool_name: str = "lookup_knowledge") -> list[float]:
    from observability.models import ToolInvocation

    rows = ToolInvocation.objects.filter(tool_name=tool_name, session_id__startswith=session_prefix)
    return [float(d) for d in rows.values_list("duration_ms", flat=True)]


def run(args) -> None:
    import httpx
    import uvicorn
    from django.core.management import call_command
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    from config.asgi import application_build
    from knowledge.models import ApiDocument
    from observability.models import ToolInvocation
    from retrieval.agents.tokens import tool_token_issue

    call_command("import_documents", str(REPO / "knowledge" / "demo_corpus"), verbosity=0)
    indexed = ApiDocument.objects.filter(status=ApiDocument.Status.INDEXED).count()
    token = tool_token_issue(name="bench-agent").key
    print(f"corpus: {indexed} demo documents indexed; {args.calls} calls per integration\n")

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(application_build(), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    results: dict[str, list[float]] = {}
    run_id = uuid.uuid4().hex[:6]

    # REST
    with httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=60) as http:
        for i in range(len(QUERIES)):  # warm-up: embed each query once
            http.post("/api/tools/lookup_knowledge", json={"query": QUERIES[i], "session_id": f"warm-{i}"})
        times = []
        for i in range(args.calls):
            body = {"query": QUERIES[i % len(QUERIES)], "session_id": f"rest-{run_id}-{i}"}
            t = time.perf_counter()
            http.post("/api/tools/lookup_knowledge", json=body).raise_for_status()
            times.append((time.perf_counter() - t) * 1000)
        results["REST lookup"] = times
        times = []
        for i in range(args.calls):
            body = {
                "knowledge_id": "*",
                "query": QUERIES[i % len(QUERIES)],
                "retrieval_setting": {"top_k": 3, "score_threshold": 0.0},
            }
            t = time.perf_counter()
            http.post(
                "/api/dify/retrieval", json=body, headers={"Authorization": f"Bearer {token}"}
            ).raise_for_status()
            times.append((time.perf_counter() - t) * 1000)
        results["Dify retrieval"] = times

    async def mcp_calls(session: ClientSession, prefix: str) -> list[float]:
        times = []
        for i in range(args.calls):
            t = time.perf_counter()
            result = await session.call_tool(
                "lookup_knowledge", {"query": QUERIES[i % len(QUERIES)], "session_id": f"{prefix}-{i}"}
            )
            times.append((time.perf_counter() - t) * 1000)
            assert not result.isError, result.content
        return times

    async def over_http():
        async with httpx.AsyncClient(headers={"Authorization": f"Token {token}"}, timeout=60) as http:
            t = time.perf_counter()
            async with (
                streamable_http_client(f"{base}/mcp/", http_client=http) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                opened = (time.perf_counter() - t) * 1000
                return opened, await mcp_calls(session, f"mcph-{run_id}")

    async def over_stdio():
        params = StdioServerParameters(
            command=sys.executable, args=["manage.py", "mcp_server"], cwd=str(REPO), env=dict(os.environ)
        )
        t = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            opened = (time.perf_counter() - t) * 1000
            # the child has its own caches: warm them as the server's were
            for i in range(len(QUERIES)):
                await session.call_tool(
                    "lookup_knowledge", {"query": QUERIES[i], "session_id": f"warm-s-{i}"}
                )
            return opened, await mcp_calls(session, f"mcps-{run_id}")

    http_open, results["MCP lookup, streamable HTTP"] = asyncio.run(over_http())
    stdio_open, results["MCP lookup, stdio"] = asyncio.run(over_stdio())
    server.should_exit = True
    thread.join(timeout=10)

    server_side = {
        "REST lookup": _server_ms(f"rest-{run_id}"),
        "MCP lookup, streamable HTTP": _server_ms(f"mcph-{run_id}"),
        "MCP lookup, stdio": _server_ms(f"mcps-{run_id}"),
        "Dify retrieval": [
            float(d)
            for d in ToolInvocation.objects.filter(tool_name="dify_retrieval").values_list(
                "duration_ms", flat=True
            )
        ],
    }
    width = max(len(k) for k in results)
    print(f"{'':{width}}   client side (wall time per call)")
    for name, times in results.items():
        print(f"{name:{width}}   {_ms(times)}")
    print(f"\n{'':{width}}   server side (duration_ms of the recorded invocations, whole ms)")
    for name, times in server_side.items():
        print(f"{name:{width}}   {_ms(times)}   ({len(times)} records)")
    print(
        f"\nopening an MCP session: streamable HTTP {http_open:.0f} ms; stdio (process start + setup) {stdio_open:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200, help="calls per integration (default 200)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="agentkb-bench-integrations-"))
    milvus = None
    try:
        port = _free_port()
        milvus = subprocess.Popen(
            [str(Path(sys.executable).parent / "milvus-lite"), "server", "--data-dir", str(folder / "milvus"),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(port, milvus)
        os.environ.update(
            AGENTKB_VAR_DIR=str(folder),
            DJANGO_SETTINGS_MODULE="config.settings",
            DATABASE_URL=f"sqlite:///{folder / 'bench.sqlite3'}",
            MILVUS_URI=f"http://127.0.0.1:{port}",
            MILVUS_COLLECTION="bench_integrations",
            CELERY_TASK_ALWAYS_EAGER="true",
            CELERY_BROKER_URL="memory://",
            RETRIEVAL_TRACKER_BACKEND="memory",
            API_THROTTLE_TOOL="100000/min",
            API_THROTTLE_TOOL_BURST="",
            LOG_LEVEL="WARNING",
        )
        os.environ.pop("REDIS_URL", None)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        run(args)
    finally:
        if milvus is not None:
            milvus.terminate()
            try:
                milvus.wait(timeout=15)
            except subprocess.TimeoutExpired:
                milvus.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
