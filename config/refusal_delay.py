"""Budget refusals (HTTP 429) answered after a short wait, so a client that ignores Retry-After
slows itself down instead of the server (ASGI only).

A 429 is cheap, but not free: a flooding client that asks again the moment it is refused gets
thousands of refusals a second (1,300 a second from 8 threads in ``bench/load.py --two-agents``),
and answering them took a core of the server's two from every other agent's lookups. nginx's
``limit_req`` does the same by delaying excess requests. Here every 429 under this process, from
the early refusal, the MCP gate or Django (budget, burst cap, wrong keys past their address's
budget), is held ``API_REFUSAL_DELAY_MS`` (250) before it is sent: eight threads then get at most
32 refusals a second. The wait costs nothing but an open connection: it runs on the event loop,
after Django has given its thread back. An agent that honours Retry-After never waits here twice.
At most ``MAX_WAITING`` refusals wait at once per process; past that they are answered at once,
so a flood from many connections cannot pile up open sockets.
"""

from __future__ import annotations

import asyncio

from django.conf import settings

MAX_WAITING = 256


class RefusalDelay:
    """ASGI middleware: responses with status 429 are held ``API_REFUSAL_DELAY_MS`` before
    they are sent; every other response passes through untouched, streamed as it comes."""

    def __init__(self, app) -> None:
        self.app = app
        self.waiting = 0

    async def __call__(self, scope, receive, send):
        delay_s = settings.API_REFUSAL_DELAY_MS / 1000
        if scope["type"] != "http" or delay_s <= 0:
            await self.app(scope, receive, send)
            return
        held: list[dict] = []

        async def hold_refusals(message):
            if held or (message["type"] == "http.response.start" and message["status"] == 429):
                held.append(message)
            else:
                await send(message)

        await self.app(scope, receive, hold_refusals)
        if not held:
            return
        if self.waiting < MAX_WAITING:
            self.waiting += 1
            try:
                await asyncio.sleep(delay_s)
            finally:
                self.waiting -= 1
        for message in held:
            await send(message)
