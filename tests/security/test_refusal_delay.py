"""Every 429 answered after API_REFUSAL_DELAY_MS on the event loop, every other answer at once:
a client that asks again the moment it is refused slows itself, not the server.

The production application over real uvicorn: ``tests/security/test_early_refusal.py`` also
checks the delayed 429 there.
"""

from __future__ import annotations

import asyncio
import time

from config import refusal_delay
from config.refusal_delay import RefusalDelay


def _app(status: int, chunks: int = 1):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": status, "headers": []})
        for i in range(chunks):
            await send({"type": "http.response.body", "body": b"x", "more_body": i < chunks - 1})

    return app


def _call(app, scope_type: str = "http") -> tuple[list[tuple[float, dict]], float]:
    sent: list[tuple[float, dict]] = []

    async def run():
        started = time.monotonic()

        async def send(message):
            sent.append((time.monotonic() - started, message))

        async def receive():
            return {"type": "http.request", "body": b""}

        await app({"type": scope_type}, receive, send)
        return time.monotonic() - started

    return sent, asyncio.run(run())


def test_a_refusal_waits_the_delay_and_arrives_whole(settings):
    settings.API_REFUSAL_DELAY_MS = 200
    sent, took = _call(RefusalDelay(_app(429, chunks=3)))
    assert took >= 0.2
    assert [m["type"] for _, m in sent] == ["http.response.start"] + ["http.response.body"] * 3
    assert all(at >= 0.2 for at, _ in sent)  # nothing of it left before the wait


def test_other_answers_go_at_once_and_stream_as_they_come(settings):
    settings.API_REFUSAL_DELAY_MS = 500
    for status in (200, 401, 404, 503):
        sent, took = _call(RefusalDelay(_app(status, chunks=2)))
        assert took < 0.2, status
        assert sent[0][1]["status"] == status


def test_no_delay_when_the_setting_is_zero(settings):
    settings.API_REFUSAL_DELAY_MS = 0
    _, took = _call(RefusalDelay(_app(429)))
    assert took < 0.1


def test_past_the_cap_of_waiting_refusals_one_is_answered_at_once(settings, monkeypatch):
    settings.API_REFUSAL_DELAY_MS = 300
    monkeypatch.setattr(refusal_delay, "MAX_WAITING", 2)
    delayed = RefusalDelay(_app(429))

    async def three_at_once():
        async def one():
            started = time.monotonic()

            async def send(message):
                pass

            async def receive():
                return {"type": "http.request", "body": b""}

            await delayed({"type": "http"}, receive, send)
            return time.monotonic() - started

        return sorted(await asyncio.gather(one(), one(), one()))

    took = asyncio.run(three_at_once())
    assert took[0] < 0.15 and took[1] >= 0.3 and took[2] >= 0.3
    assert delayed.waiting == 0


def test_the_production_application_delays_refusals():
    from config import asgi

    assert isinstance(asgi.application, RefusalDelay)
