"""ASGI entry point: Django, plus the MCP server's streamable HTTP transport under ``/mcp``.

``uvicorn config.asgi:application`` serves both (Procfile ``web``); in production gunicorn's
uvicorn workers do, each one all of it (docs/operations.md "Web processes in production":
``gunicorn -c config/gunicorn_conf.py -k uvicorn_worker.UvicornWorker -w 4 config.asgi:application``).
Requests to ``/mcp`` or ``/mcp/...`` go to the MCP session manager behind the tool-token check
(``retrieval.entrypoints.mcp_http.McpTokenAuth``: host, origin, token, session cap, throttle);
everything else goes to Django. The MCP session manager lives for the process: it is started and
stopped by the ASGI lifespan protocol. It runs the transport statelessly and keeps no session in
memory (``mcp_sessions``), so any worker serves any session.
"""

import logging
import os

from asgiref.sync import sync_to_async

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
from config.asgi_lanes import get_laned_asgi_application

# Django's handler, on a few long-lived threads that keep their database connections
# (config/asgi_lanes.py), not a thread and a connection per request.
django_application = get_laned_asgi_application()

from django.conf import settings  # noqa: E402

if settings.DEBUG:
    # What runserver does in development: the admin's static files, served by Django itself.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_application = ASGIStaticFilesHandler(django_application)

from config.refusal_delay import RefusalDelay  # noqa: E402
from retrieval.entrypoints.early_refusal import refuse_if_refused  # noqa: E402
from retrieval.entrypoints.mcp_server import mcp_http_app  # noqa: E402  (needs the apps loaded above)

MCP_PREFIX = "/mcp"
logger = logging.getLogger(__name__)


def application_build():
    mcp_app, session_manager = mcp_http_app()

    async def application(scope, receive, send):
        if scope["type"] == "lifespan":
            await _lifespan(session_manager, receive, send)
        elif scope["type"] == "http" and (
            scope["path"] == MCP_PREFIX or scope["path"].startswith(MCP_PREFIX + "/")
        ):
            await mcp_app(scope, receive, send)
        elif scope["type"] == "http" and await refuse_if_refused(scope, send):
            # An agent past its budget, refused again on the event loop, never waiting for one
            # of the process's threads for Django (retrieval/entrypoints/early_refusal.py).
            return
        else:
            await django_application(scope, receive, send)

    # Every 429 held a moment on the event loop: a client that ignores Retry-After slows itself
    # (config/refusal_delay.py).
    return RefusalDelay(application)


def _lexical_engine_decide() -> None:
    """Decide (and log) where BM25 lives when the server starts, not at the first lookup. A
    vector store that does not answer yet leaves the decision to the first lookup; a setting that
    cannot work (``LEXICAL_ENGINE=milvus`` on a Milvus without BM25) stops the start."""
    from knowledge.lexical import get_lexical_engine
    from knowledge.vectorstore import VectorStoreError

    try:
        get_lexical_engine()
    except VectorStoreError:
        logger.warning("Milvus did not answer at start; the lexical engine is decided on the first lookup")


def _warm_up() -> None:
    from retrieval.warmup import process_warm_up

    process_warm_up()


async def _lifespan(session_manager, receive, send):
    message = await receive()
    if message["type"] != "lifespan.startup":
        return
    try:
        await sync_to_async(_lexical_engine_decide)()
        await sync_to_async(_warm_up)()
        async with session_manager.run():
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
    except Exception as exc:  # reported to the server, which then refuses to start
        await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
        return
    await send({"type": "lifespan.shutdown.complete"})


application = application_build()
