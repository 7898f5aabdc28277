"""One agent's budget against gunicorn with four worker processes sharing Redis (service-backed
run): sixteen threads flood one agent's calls and the workers together accept the budget, not
four budgets, nor the extra calls a read-append-write count lets through when two workers read
the same count (845 accepted in 19 s against 600/min before the count became one Lua script).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from retrieval.agents.tokens import tool_token_issue
from tests.conftest import REPO, free_port, stop_process, wait_for_port

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

BUDGET = 20
# Accepted calls allowed above the budget: none. The count is one atomic step in Redis; a
# tolerance would hide the race this test exists for.
TOLERANCE = 0
PROMPT = "/api/prompts/executor"  # agent-facing, no vector search: the workers stay light


@pytest.fixture
def gunicorn_four_workers(tmp_path):
    """``gunicorn config.wsgi -w 4`` on a free loopback port, on this test's database and Redis."""
    from django.db import connection

    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"],
        "API_THROTTLE_TOOL": f"{BUDGET}/min",
        "AGENTKB_VAR_DIR": str(tmp_path),
        "LOG_LEVEL": "WARNING",
    }
    log = open(tmp_path / "gunicorn.log", "wb")  # noqa: SIM115 - closed below
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    proc = subprocess.Popen(
        [gunicorn, "config.wsgi", "--workers", "4", "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, proc=proc, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)
        log.close()


def test_four_workers_accept_one_budget_from_sixteen_threads(gunicorn_four_workers):
    # Given an agent with a budget of 20 calls a minute, served by four worker processes
    key = tool_token_issue(name=f"flood-{uuid.uuid4().hex[:6]}").key
    url = gunicorn_four_workers + PROMPT
    # (every worker booted and warm, with a token no budget belongs to)
    warm = tool_token_issue(name=f"warm-{uuid.uuid4().hex[:6]}").key
    for _ in range(8):
        assert httpx.get(url, headers={"Authorization": f"Token {warm}"}, timeout=60).status_code == 200
    barrier = threading.Barrier(16)

    def flood(_):
        barrier.wait()
        statuses = []
        for _ in range(20):
            # A new connection each time: gunicorn's sync workers take turns at the socket.
            statuses.append(httpx.get(url, headers={"Authorization": f"Token {key}"}, timeout=60).status_code)
        return statuses

    # When sixteen threads send 320 requests at once
    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        statuses = [s for batch in pool.map(flood, range(16)) for s in batch]
    elapsed = time.monotonic() - started

    # Then the four workers together accept the budget and refuse the rest with 429
    accepted = statuses.count(200)
    assert set(statuses) <= {200, 429}, statuses
    assert accepted <= BUDGET + TOLERANCE, f"{accepted} accepted in {elapsed:.1f}s against {BUDGET}/min"
    if elapsed < 60:  # all inside one window: the whole budget was usable
        assert accepted == BUDGET
