"""``/mcp/`` on every web worker: the production web command (gunicorn, four uvicorn workers over
``config.asgi``, production settings) on loopback, against this run's MariaDB database, Redis and
Milvus. Over real HTTP, each request sent to a worker of the test's choosing
(``tests.support.workers``: the kernel says which worker holds a connection):

- a session opened on one worker answers on every other, and its action memory follows it (the
  second identical lookup, on another worker, is withheld);
- another agent's token presenting the session's id gets the unknown-session 404 on every worker;
- an agent's call budget is counted once across the workers: with a budget of N, N requests
  spread over the four are served and the next is refused.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from itertools import cycle
from pathlib import Path

import httpx
import pytest

from retrieval.agents.tokens import tool_token_issue
from tests.conftest import REPO, free_port, stop_process
from tests.retrieval.conftest import seed_documents
from tests.support.mcp_http import ACCEPT, INITIALIZE, INITIALIZED
from tests.support.workers import client_on, served_by, worker_pids

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WORKERS = 4
# The worker class the production command names (docs/operations.md "Web processes").
WORKER_CLASS = "uvicorn_worker.UvicornWorker"


def _call(name: str, arguments: dict, id_: int) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@dataclass
class Web:
    base_url: str
    workers: list[int]

    def send(self, worker: int, body: dict, *, token, session: str | None = None) -> httpx.Response:
        """POST ``body`` to /mcp/ over a connection served by ``worker``; checks it was."""
        headers = {**ACCEPT, "Authorization": f"Token {token.key}"}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        client = client_on(self.base_url, worker, self.workers)
        try:
            response = client.post("/mcp/", json=body, headers=headers)
            assert served_by(response, self.workers) == worker
        finally:
            client.close()
        return response


@pytest.fixture
def production_web(settings, tmp_path):
    """Starts the production web command with the given extra environment; stopped afterwards."""
    from django.db import connection

    started: list[tuple[subprocess.Popen, object]] = []
    # One key for both sides: the tokens this test issues are stored as HMACs under it.
    settings.SECRET_KEY = secrets.token_urlsafe(50)

    def start(**extra: str) -> Web:
        port = free_port()
        db_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings_production",
            "DEBUG": "false",
            "SECRET_KEY": settings.SECRET_KEY,
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "false",  # plain HTTP on loopback
            "DATABASE_URL": db_url,
            "MILVUS_URI": settings.MILVUS_URI,
            "MILVUS_COLLECTION": settings.MILVUS_COLLECTION,
            "LEXICAL_INDEX_DIR": settings.LEXICAL_INDEX_DIR,
            "AGENTKB_VAR_DIR": str(tmp_path / "var"),
            "RETRIEVAL_INDEX_REFRESH_MS": "0",
            **extra,
        }
        log_path = tmp_path / f"gunicorn-{port}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "-c",
                "config/gunicorn_conf.py",
                "-k",
                WORKER_CLASS,
                "-w",
                str(WORKERS),
                "-b",
                f"127.0.0.1:{port}",
                # The one flag the documented command lacks: a connection chosen for a worker
                # (client_on) stays open past gunicorn's 2 s keep-alive on a loaded machine.
                "--keep-alive",
                "30",
                "config.asgi:application",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started.append((proc, log))
        # Each worker loads the model and the indexes before it serves (gunicorn_conf.post_fork).
        deadline = time.monotonic() + 240
        while log_path.read_bytes().count(b"Application startup complete") < WORKERS:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not start:\n" + log_path.read_text(errors="replace"))
            time.sleep(0.3)
        workers = worker_pids(proc.pid)
        assert len(workers) == WORKERS, workers
        return Web(f"http://127.0.0.1:{port}", workers)

    yield start
    for proc, log in started:
        stop_process(proc, timeout=30)
        log.close()


def _result(response: httpx.Response) -> dict:
    """The JSON-RPC result of a tool call answered as a server-sent event (or plain JSON)."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        message = json.loads(data[-1])
    else:
        message = response.json()
    result = message["result"]
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"])


def _returned(body: dict) -> set[str]:
    docs = ([body["primary"]] if body["primary"] else []) + body["supplement"]
    return {d["docKey"] for d in docs}


def test_a_session_opened_on_one_worker_is_served_by_every_other_and_only_for_its_agent(
    corpus, production_web
):
    seed_documents(corpus)
    agent = tool_token_issue(name=f"agent-{uuid.uuid4().hex[:6]}")
    other = tool_token_issue(name=f"other-{uuid.uuid4().hex[:6]}")
    web = production_web()
    opener, *others = web.workers

    # Given a session opened on one worker (and initialised on another)
    opened = web.send(opener, INITIALIZE, token=agent)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    assert web.send(others[0], INITIALIZED, token=agent, session=session).status_code == 202

    # When every other worker is asked in it, each answers
    for i, worker in enumerate(others):
        knowledge_map = _result(
            web.send(worker, _call("get_knowledge_map", {}, 10 + i), token=agent, session=session)
        )
        assert {d["domain_id"] for d in knowledge_map["available_knowledge_domains"]} >= {"api"}

    # and its action memory is one: the document a lookup on one worker returned is withheld
    # from the same lookup on another
    lookup = _call("lookup_knowledge", {"query": "ERR_TIMEOUT"}, 20)
    first = _result(web.send(others[1], lookup, token=agent, session=session))
    second = _result(web.send(others[2], {**lookup, "id": 21}, token=agent, session=session))
    assert first["found"] is True and first["primary"]["docKey"] == "api/error-codes.md"
    assert second["relevanceLevel"] == "DEDUPED" and "api/error-codes.md" not in _returned(second)
    assert first["sessionId"] == second["sessionId"] == f"mcp-{session}"

    # Another agent presenting the session's id is told, on every worker, what an unknown id is
    unknown = web.send(opener, lookup, token=other, session=uuid.uuid4().hex)
    assert unknown.status_code == 404
    for worker in web.workers:
        stolen = web.send(worker, lookup, token=other, session=session)
        assert stolen.status_code == 404 and stolen.json() == unknown.json()

    # and the session is still its owner's, wherever it lands
    for i, worker in enumerate(web.workers):
        assert (
            web.send(worker, _call("get_knowledge_map", {}, 30 + i), token=agent, session=session).status_code
            == 200
        )


def test_an_agents_budget_is_counted_once_across_the_workers(corpus, production_web):
    budget = 10
    agent = tool_token_issue(name=f"agent-{uuid.uuid4().hex[:6]}")
    web = production_web(API_THROTTLE_TOOL=f"{budget}/min")
    workers = cycle(web.workers)

    # Given a session (two requests, each spending a call), then calls round the four workers
    opened = web.send(next(workers), INITIALIZE, token=agent)
    session = opened.headers["mcp-session-id"]
    statuses = [
        opened.status_code,
        web.send(next(workers), INITIALIZED, token=agent, session=session).status_code,
    ]
    for i in range(budget - 1):
        response = web.send(
            next(workers), _call("get_knowledge_map", {}, 10 + i), token=agent, session=session
        )
        statuses.append(response.status_code)

    # Then the budget's calls are served, over every worker (a few each, far below the budget),
    # and the one past it is refused, whichever worker gets it
    assert statuses == [200, 202] + [200] * (budget - 2) + [429]
    assert response.json()["error"]["code"] == "throttled"
    assert int(response.headers["retry-after"]) >= 1


def _connections_held() -> set[int]:
    """Ids of the connections open to this test's database now, this test's own excepted.

    Not the server's ``Connections`` counter: CI runs another suite on the same MariaDB at the
    same time, and its connections count there too."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s AND ID <> CONNECTION_ID()",
            [connection.settings_dict["NAME"]],
        )
        return {int(row[0]) for row in cursor.fetchall()}


def test_the_workers_keep_their_database_connections_from_request_to_request(corpus, production_web):
    # Given the production command, each worker running Django on two long-lived threads
    agent = tool_token_issue(name=f"agent-{uuid.uuid4().hex[:6]}")
    web = production_web(WEB_DJANGO_THREADS="2", API_THROTTLE_TOOL_BURST="")
    headers = {"Authorization": f"Token {agent.key}"}
    with httpx.Client(base_url=web.base_url, timeout=60) as warm:  # every worker has connected once
        for _ in range(20):
            assert warm.get("/api/prompts/executor", headers=headers).status_code == 200

    held = _connections_held()
    # (Django's ASGI handler closed each request's connection at its end: none stayed.)
    assert held, "no worker kept a database connection between requests"

    # When 100 agent requests reach the four workers, each on a connection of its own
    statuses = []
    for _ in range(100):
        with httpx.Client(base_url=web.base_url, timeout=60) as client:
            statuses.append(client.get("/api/prompts/executor", headers=headers).status_code)

    # Then they are served over the connections the workers' threads already held, still open,
    # and at most one a thread (4 x 2), not one more per request
    assert statuses == [200] * 100
    after = _connections_held()
    assert held <= after, f"connections {sorted(held - after)} were closed meanwhile"
    assert len(after) <= 4 * 2, f"{len(after)} database connections for four workers of two threads"
