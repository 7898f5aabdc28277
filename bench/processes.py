"""Child processes the benchmarks start on loopback (web servers, milvus-lite servers, and for the
fault benchmark MariaDB and Redis servers of its own)."""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

_given: set[int] = set()


def free_port() -> int:
    """A free loopback port: inside AGENTKB_TEST_PORTS ("first-last") when set, as the tests
    honour it on a machine several runs share, else any the system gives."""
    first, _, last = os.environ.get("AGENTKB_TEST_PORTS", "").partition("-")
    candidates = [p for p in range(int(first), int(last) + 1) if p not in _given] if first and last else [0]
    # Not yet listening when the next is asked for: never hand out the same port twice.
    for port in random.sample(candidates, len(candidates)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _given.add(s.getsockname()[1])
            return s.getsockname()[1]
    raise RuntimeError(f"no free port in AGENTKB_TEST_PORTS={os.environ['AGENTKB_TEST_PORTS']}")


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Return once something listens on 127.0.0.1:port; fail early if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def stop(proc: subprocess.Popen | None) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


class Child:
    """A server process the fault benchmark stops, hangs (SIGSTOP) and starts again: the same
    command, port and data folder every time, its output appended to one log file.

    ``ready`` is how ``start`` knows it is up: a loopback port that accepts connections, or None
    for a process without one (a Celery worker: the caller waits on what it does instead).
    ``group``: the process leads a process group of its own, so ``kill_group`` reaches its
    children too (gunicorn's and Celery's workers), as an operator's ``kill -9`` of the unit does.
    """

    def __init__(
        self,
        name: str,
        argv: list[str],
        log: Path,
        *,
        port: int | None = None,
        env: dict | None = None,
        cwd: Path | None = None,
        group: bool = False,
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        self.name, self.argv, self.log, self.port = name, argv, log, port
        self.env, self.cwd, self.group, self.stop_signal = env, cwd, group, stop_signal
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=self.group,
            )
        if self.port is not None:
            wait_for_port(self.port, self.proc, timeout=timeout)

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} is not started"
        return self.proc.pid

    def pause(self) -> None:
        """Hung, not stopped: the kernel still completes connections; nothing answers."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self, timeout: float = 30) -> None:
        """The service's own clean stop (its stop signal), SIGKILL after ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
        self._signal(self.stop_signal)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()

    def kill_group(self) -> None:
        """SIGKILL, to the whole process group when it leads one."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.group:
            os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def _signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)


def mariadb_argv(folder: Path, port: int) -> list[str]:
    """A MariaDB server of the caller's own in ``folder`` (created on first use, root without a
    password, loopback only), so a benchmark can stop and hang it without touching the machine's."""
    data = folder / "data"
    if not data.exists():
        subprocess.run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={data}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            check=True,
            capture_output=True,
        )
    return [
        "mariadbd",
        "--no-defaults",
        f"--datadir={data}",
        "--user=root",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        f"--socket={folder / 'mariadb.sock'}",
        f"--pid-file={folder / 'mariadb.pid'}",
        "--innodb-buffer-pool-size=128M",
        "--skip-log-bin",
    ]


def redis_argv(folder: Path, port: int) -> list[str]:
    """A Redis server of the caller's own: loopback, nothing kept on disk (as the machine's)."""
    return [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(folder),
    ]


def milvus_lite_argv(folder: Path, port: int) -> list[str]:
    """``milvus-lite server`` (the embedded store served over gRPC) with its data in ``folder``."""
    return [
        str(Path(sys.executable).parent / "milvus-lite"),
        "server",
        "--data-dir",
        str(folder),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def web_wsgi(port: int, *, cwd: Path, log: Path) -> subprocess.Popen:
    """``gunicorn config.wsgi`` with one sync worker on 127.0.0.1:``port``, this process's
    environment (the benchmark's settings), started and listening."""
    web = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi",
            "--workers",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
            "--timeout",
            "600",
            "--log-level",
            "warning",
        ],
        cwd=cwd,
        env=dict(os.environ),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    wait_for_port(port, web)
    return web


def lookup_post(port: int, token: str, query: str) -> tuple[float, dict, str | None]:
    """One ``POST /api/tools/lookup_knowledge`` with a fresh session (a full answer, never
    withheld): (milliseconds, body, the call's public invocation id). Anything but 200 raises."""
    body = json.dumps({"query": query, "session_id": f"bench-{uuid.uuid4().hex}"})
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request(
        "POST",
        "/api/tools/lookup_knowledge",
        body=body,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    payload = json.loads(response.read())
    elapsed = (time.perf_counter() - t0) * 1000
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"{response.status}: {payload}")
    return elapsed, payload, response.getheader("X-Invocation-Id")


def bench_environment(work: Path, milvus_uri: str, **settings: str) -> None:
    """This process's environment (and so its children's) for a throw-away agentkb in ``work``:
    SQLite and the embedded broker (no DATABASE_URL, REDIS_URL or tracker backend from the
    shell), Milvus at ``milvus_uri``, DEBUG off, budgets out of the way; ``settings`` on top."""
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "RETRIEVAL_TRACKER_BACKEND"):
        os.environ.pop(name, None)
    os.environ.update(
        {
            "AGENTKB_VAR_DIR": str(work),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "MILVUS_URI": milvus_uri,
            "DEBUG": "false",
            "SECRET_KEY": "bench-" + uuid.uuid4().hex,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECURE_SSL_REDIRECT": "false",
            "LOG_LEVEL": "WARNING",
            "API_THROTTLE_TOOL": "100000/min",
            "API_THROTTLE_TOOL_BURST": "",
            **settings,
        }
    )
