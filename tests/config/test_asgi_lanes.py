"""Django under ASGI on a few long-lived threads ("lanes"): every request's synchronous parts on a
borrowed lane, at most that many at once, each lane's database connection kept from request to
request (Django's own handler made a thread and a connection for each request).

The production command's processes on MariaDB: ``tests/retrieval/test_mcp_workers.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from django.core.signals import request_started
from django.db import connection

from config.asgi_lanes import LanedASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)


def _scope(path: str = "/healthz") -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }


async def _get(app, path: str = "/healthz", sent: list[dict] | None = None) -> int:
    sent = [] if sent is None else sent
    body_sent = False

    async def receive():
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # no disconnect while the answer is made

    async def send(message):
        sent.append(message)

    await app(_scope(path), receive, send)
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


class Seen:
    """What each request's start saw, from inside its synchronous part: its thread, its database
    connection, and how many requests were inside at once."""

    def __init__(self, hold_s: float = 0.0) -> None:
        self.threads: set[str] = set()
        self.connections: set[int] = set()
        self.inside = self.most_inside = 0
        self.hold_s = hold_s
        self._lock = threading.Lock()

    def __call__(self, **kwargs) -> None:
        connection.ensure_connection()
        with self._lock:
            self.threads.add(threading.current_thread().name)
            self.connections.add(id(connection.connection))
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        time.sleep(self.hold_s)
        with self._lock:
            self.inside -= 1


@pytest.fixture
def seen():
    receivers = []

    def watch(hold_s: float = 0.0) -> Seen:
        receiver = Seen(hold_s)
        request_started.connect(receiver, weak=False)
        receivers.append(receiver)
        return receiver

    yield watch
    for receiver in receivers:
        request_started.disconnect(receiver)


def test_forty_requests_run_on_the_lanes_and_keep_their_connections(settings, seen):
    # Given a handler with three lanes
    settings.WEB_DJANGO_THREADS = 3
    app = LanedASGIHandler()
    watched = seen()

    # When forty requests arrive at once, then again
    async def requests():
        return [await asyncio.gather(*(_get(app) for _ in range(40))) for _ in range(2)]

    statuses = [s for batch in asyncio.run(requests()) for s in batch]

    # Then every one is answered, on at most three threads, with at most three connections
    assert set(statuses) <= {200, 503} and len(statuses) == 80
    assert len(watched.threads) <= 3 and all(name.startswith("django-lane-") for name in watched.threads)
    assert 1 <= len(watched.connections) <= 3


def test_no_more_requests_run_django_at_once_than_there_are_lanes(settings, seen):
    # Given two lanes, and requests that each hold their lane for 50 ms
    settings.WEB_DJANGO_THREADS = 2
    app = LanedASGIHandler()
    watched = seen(hold_s=0.05)

    # When ten arrive at once
    async def requests():
        return await asyncio.gather(*(_get(app) for _ in range(10)))

    started = time.monotonic()
    statuses = asyncio.run(requests())
    took = time.monotonic() - started

    # Then both lanes are used, never more, and the others waited their turn
    assert len(statuses) == 10
    assert watched.most_inside == 2
    assert took >= 0.05 * 10 / 2


def test_one_light_caller_keeps_to_one_lane(settings, seen):
    # Given eight lanes and one caller at a time
    settings.WEB_DJANGO_THREADS = 8
    app = LanedASGIHandler()
    watched = seen()

    async def requests():
        return [await _get(app) for _ in range(20)]

    asyncio.run(requests())
    # Then the most recently freed lane serves the next request: one thread, one connection
    assert len(watched.threads) == 1 and len(watched.connections) == 1


def test_the_middleware_chain_and_view_run_in_one_synchronous_step(settings):
    # Given the handler: its chain is Django's sync chain (no hop to the event loop and back at
    # each middleware), and the middleware still answer: an unknown API path is a JSON 404
    import inspect

    app = LanedASGIHandler()
    assert not inspect.iscoroutinefunction(app._middleware_chain)
    sent: list[dict] = []
    asyncio.run(_get(app, "/api/no-such-endpoint", sent))
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 404
    assert (b"content-type", b"application/json") in [(k.lower(), v) for k, v in start["headers"]]


def test_the_production_application_is_laned():
    from config import asgi

    handler = asgi.django_application
    handler = getattr(handler, "application", handler)  # DEBUG's static-files wrapper
    assert isinstance(handler, LanedASGIHandler)


def test_a_thread_count_below_one_is_refused_at_start():
    from tests.support.settings_start import django_setup

    out = django_setup({"WEB_DJANGO_THREADS": "0"})
    assert out.returncode != 0 and "WEB_DJANGO_THREADS must be at least 1; got 0" in out.stderr
