"""Django under ASGI on a few long-lived threads per process ("lanes"), not a new thread a request.

Django's ASGI handler runs each request's synchronous parts (middleware, views, the ORM) on a
thread made for that request and dropped after it (asgiref's ``ThreadSensitiveContext``).
Database connections belong to threads, so every request opened a new connection (201 MariaDB
connections for 200 requests under the production command) and left the old one to the garbage
collector; ``CONN_MAX_AGE`` could keep nothing. Under a flood of wrong keys those connects
queued behind the CPU until one outlasted ``DATABASE_CONNECT_TIMEOUT``, and the breaker then
answered 503 "database" to every agent (Django's own documentation: disable persistent
connections under ASGI, or pool them).

Here a request borrows one of ``WEB_DJANGO_THREADS`` lanes, each a single-thread executor that
lives as long as the process, and runs all its synchronous parts there (asgiref's
``ThreadSensitiveContext(executor=...)``). A lane's thread keeps its connection as a sync
worker's does (``CONN_MAX_AGE``, checked before reuse: ``CONN_HEALTH_CHECKS``), so a process holds
at most that many connections. At most that many requests per process run Django code at once;
the others wait on the event loop, where the early refusal, ``/mcp/``'s gate and ``/healthz``'s
waits go on regardless. A request whose client went away frees its lane at once; whatever sync
call it had started finishes on the lane's thread before the lane's next request starts there.
"""

from __future__ import annotations

import asyncio
import weakref
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler


class Lanes:
    """``count`` single-thread executors, lent one per request, for each event loop."""

    def __init__(self, count: int) -> None:
        self.count = count
        # One set per event loop (a process serves on one; tests may run several in turn).
        self._free: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.LifoQueue] = (
            weakref.WeakKeyDictionary()
        )

    def _queue(self) -> asyncio.LifoQueue:
        loop = asyncio.get_running_loop()
        queue = self._free.get(loop)
        if queue is None:
            # Last in, first out: a light load keeps reusing the same few threads and connections.
            queue = asyncio.LifoQueue()
            for n in range(self.count):
                queue.put_nowait(ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"django-lane-{n}"))
            self._free[loop] = queue
        return queue

    @asynccontextmanager
    async def borrowed(self):
        queue = self._queue()
        executor = await queue.get()
        try:
            yield executor
        finally:
            queue.put_nowait(executor)


class LanedASGIHandler(ASGIHandler):
    """Django's ASGI handler, each request's synchronous parts on a borrowed lane, its middleware
    and view in one step there."""

    def __init__(self) -> None:
        # Not ASGIHandler.__init__: it builds the middleware chain for async mode. Ours is the
        # sync chain, run whole on the lane (get_response_async below).
        self.load_middleware(is_async=False)
        self.lanes = Lanes(settings.WEB_DJANGO_THREADS)

    async def get_response_async(self, request):
        # Django's async chain hops between the event loop and the thread at every boundary
        # between a sync-only middleware (WhiteNoise's) and async-capable ones, and again for the
        # sync view and the error log: 7.3 ms of CPU for a trivial request against 3.0 ms through
        # the same chain run synchronously. One hop onto the lane instead, as a sync worker runs
        # it. An async view (/healthz) then runs on the event loop while its lane waits for it.
        return await sync_to_async(self.get_response)(request)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        async with self.lanes.borrowed() as executor, ThreadSensitiveContext(executor=executor):
            await self.handle(scope, receive, send)


def get_laned_asgi_application() -> LanedASGIHandler:
    """``django.core.asgi.get_asgi_application``, with lanes."""
    django.setup(set_prefix=False)
    return LanedASGIHandler()
