"""GET /healthz: the state of the database, the vector store, the lexical index, the Celery broker,
the Redis action memory and the storage (free space and writability of the var and index folders).

200 when all answer; 503 with ``down`` naming each part that does not. Bounded: every part is
checked at once, each in a thread of its own, and the answer waits at most HEALTH_TIMEOUT
seconds (well under a probe's 2 s): a part that has not answered by then is down ("no answer
within ..."), however it hangs. A part whose check from an earlier request still hangs is not
checked again beside it: the request waits on the same check, so hung checks never pile up. Anyone (a load balancer,
a probe, an agent with its tool token) gets only up/down per part; the details (backends, URIs,
errors, timings) go only to staff signed in to the admin, with every URI's password and
credential parameters masked (``config.credentials``). An agent learns nothing about where the
services run or how to reach them.

It lives in ``config``: it checks the whole service, not one app.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from pathlib import Path

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.credentials import mask_credentials


def _check_database() -> str:
    # In a check thread: its own connection, closed after, so none is left open per thread.
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return connection.vendor
    finally:
        connection.close()


def _check_vector_store() -> str:
    from knowledge.vectorstore import get_vector_store

    store = get_vector_store()
    store.ping()
    where = "milvus-lite (embedded)" if store.is_embedded else store.uri
    return f"{where}; {store.capabilities().summary()}"


def _check_lexical_index() -> str:
    """The lexical engine in force and that it answers: the tantivy index opens and counts its
    chunks, or Milvus's own BM25 (checked with the vector store). An index whose analyser changed
    still answers, and says it needs a rebuild."""
    from knowledge.lexical import get_lexical_engine, lexical_engine_choice

    engine = get_lexical_engine()
    if not engine.separate:
        # Milvus's own BM25: ask the server first as the vector store's check does (a probe,
        # past an open breaker), so a server that came back is seen at once here too. The two
        # checks run side by side, and the count alone would be refused until the breaker's
        # cooldown ends.
        from knowledge.vectorstore import get_vector_store

        get_vector_store().ping()
    chunks = engine.count()
    problem = engine.signature_problem()
    detail = f"{engine.name} ({lexical_engine_choice().reason}), {chunks} chunks"
    return f"{detail}; needs a rebuild: {problem}" if problem else detail


def _check_broker() -> str:
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=2)
        return conn.transport_cls if isinstance(conn.transport_cls, str) else conn.transport.driver_name


def _check_action_memory() -> str:
    """The Redis the action memory (and cache, throttle) use, pinged with a short deadline."""
    if not settings.REDIS_URL:
        return "in-process (no REDIS_URL)"
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
    finally:
        client.close()
    return settings.REDIS_URL


def _check_storage() -> str:
    """The var folder and the lexical index folder: writable, with room left. A full disk made
    uploads, logins and lookups fail while every other part said ok."""
    minimum = int(settings.HEALTH_MIN_FREE_MB) * 1024 * 1024
    details = []
    for folder in {Path(settings.VAR_DIR), Path(settings.LEXICAL_INDEX_DIR)}:
        if not folder.exists():
            continue
        free = shutil.disk_usage(folder).free
        if free < minimum:
            raise OSError(f"{folder}: {free // (1024 * 1024)} MB free, below HEALTH_MIN_FREE_MB")
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".healthz-") as probe:
            probe.write(b"ok")
            probe.flush()
        details.append(f"{folder}: {free // (1024 * 1024)} MB free")
    return "; ".join(sorted(details))


CHECKS: dict[str, Callable[[], str]] = {
    "database": _check_database,
    "vector_store": _check_vector_store,
    "lexical_index": _check_lexical_index,
    "broker": _check_broker,
    "action_memory": _check_action_memory,
    "storage": _check_storage,
}

_pool = ThreadPoolExecutor(max_workers=12, thread_name_prefix="healthz")
_running: dict[str, Future] = {}
_running_lock = threading.Lock()


def _timed(check: Callable[[], str]) -> dict:
    started = time.perf_counter()
    try:
        result = {"ok": True, "detail": mask_credentials(str(check()))}
    except Exception as exc:  # a health check reports every failure, whatever its type
        result = {"ok": False, "error": mask_credentials(f"{type(exc).__name__}: {exc}")[:500]}
    result["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


def _submit(name: str, check: Callable[[], str]) -> Future:
    with _running_lock:
        future = _running.get(name)
        if future is None or future.done():
            future = _running[name] = _pool.submit(_timed, check)
        return future


def run_checks() -> dict[str, dict]:
    """Every part at once, the whole within HEALTH_TIMEOUT seconds."""
    timeout = float(settings.HEALTH_TIMEOUT)
    futures = {name: _submit(name, check) for name, check in CHECKS.items()}
    wait_futures(futures.values(), timeout=timeout)
    results: dict[str, dict] = {}
    for name, future in futures.items():
        if future.done():
            results[name] = future.result()
        else:
            results[name] = {"ok": False, "error": f"no answer within {timeout:g} s", "ms": timeout * 1000}
    return results


def _may_see_details(request: HttpRequest, database_up: bool) -> bool:
    """Staff signed in to the admin; never an agent: a tool token opens no door here. Asked
    only once the database answered: finding the user reads the session from it."""
    if not database_up:
        return False
    user = getattr(request, "user", None)
    return user is not None and user.is_active and user.is_staff


@never_cache
@require_GET
async def healthz(request: HttpRequest) -> JsonResponse:
    # Async: under the ASGI workers the synchronous views of a process share a few threads
    # (config/asgi_lanes.py), and waiting out a hung part (up to HEALTH_TIMEOUT) on one of them
    # held lookups behind the probe. The checks wait in a thread of their own; only the short
    # session read for staff details goes through the views' threads.
    checks = await asyncio.to_thread(run_checks)
    down = [name for name, result in checks.items() if not result["ok"]]
    if not await sync_to_async(_may_see_details)(request, checks["database"]["ok"]):
        checks = {name: {"ok": result["ok"]} for name, result in checks.items()}
    body = {"status": "ok" if not down else "unavailable", "down": down, "checks": checks}
    return JsonResponse(body, status=200 if not down else 503)
