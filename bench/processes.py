"""Child processes the benchmarks start on loopback (web servers, milvus-lite servers)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time

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
