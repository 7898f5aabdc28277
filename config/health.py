"""GET /healthz: the state of the database, the vector store, the lexical index and the Celery broker.

200 when all answer; 503 with ``down`` naming each part that does not. Anyone (a load balancer,
a probe, an agent with its tool token) gets only up/down per part; the details (backends, URIs,
errors, timings) go only to staff signed in to the admin, with every URI's password and
credential parameters masked (``config.credentials``). An agent learns nothing about where the
services run or how to reach them.

It lives in ``config``: it checks the whole service, not one app.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.credentials import mask_credentials


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return connection.vendor


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
    chunks = engine.count()
    problem = engine.signature_problem()
    detail = f"{engine.name} ({lexical_engine_choice().reason}), {chunks} chunks"
    return f"{detail}; needs a rebuild: {problem}" if problem else detail


def _check_broker() -> str:
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=2)
        return conn.transport_cls if isinstance(conn.transport_cls, str) else conn.transport.driver_name


CHECKS: dict[str, Callable[[], str]] = {
    "database": _check_database,
    "vector_store": _check_vector_store,
    "lexical_index": _check_lexical_index,
    "broker": _check_broker,
}


def run_checks() -> dict[str, dict]:
    results: dict[str, dict] = {}
    for name, check in CHECKS.items():
        started = time.perf_counter()
        try:
            detail = check()
            results[name] = {"ok": True, "detail": mask_credentials(str(detail))}
        except Exception as exc:  # a health check reports every failure, whatever its type
            results[name] = {"ok": False, "error": mask_credentials(f"{type(exc).__name__}: {exc}")[:500]}
        results[name]["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return results


def _may_see_details(request: HttpRequest) -> bool:
    """Staff signed in to the admin; never an agent: a tool token opens no door here."""
    user = getattr(request, "user", None)
    return user is not None and user.is_active and user.is_staff


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = run_checks()
    down = [name for name, result in checks.items() if not result["ok"]]
    if not _may_see_details(request):
        checks = {name: {"ok": result["ok"]} for name, result in checks.items()}
    body = {"status": "ok" if not down else "unavailable", "down": down, "checks": checks}
    return JsonResponse(body, status=200 if not down else 503)
