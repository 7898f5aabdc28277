"""ASGI entry point: Django, plus the MCP server's streamable HTTP transport under ``/mcp``.

``uvicorn config.asgi:application`` serves both (Procfile ``web``). Requests to ``/mcp`` or
``/mcp/...`` go to the MCP session manager behind the tool-token check
(``retrieval.entrypoints.mcp_http.McpTokenAuth``: host, origin, token, session cap, throttle);
everything else goes to Django. The MCP session
manager lives for the process: it is started and stopped by the ASGI lifespan protocol.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402

if settings.DEBUG:
    # What runserver does in development: the admin's static files, served by Django itself.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_application = ASGIStaticFilesHandler(django_application)

from retrieval.entrypoints.mcp_server import mcp_http_app  # noqa: E402  (needs the apps loaded above)

MCP_PREFIX = "/mcp"


def application_build():
    mcp_app, session_manager = mcp_http_app()

    async def application(scope, receive, send):
        if scope["type"] == "lifespan":
            await _lifespan(session_manager, receive, send)
        elif scope["type"] == "http" and (
            scope["path"] == MCP_PREFIX or scope["path"].startswith(MCP_PREFIX + "/")
        ):
            await mcp_app(scope, receive, send)
        else:
            await django_application(scope, receive, send)

    return application


async def _lifespan(session_manager, receive, send):
    message = await receive()
    if message["type"] != "lifespan.startup":
        return
    try:
        async with session_manager.run():
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
    except Exception as exc:  # reported to the server, which then refuses to start
        await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
        return
    await send({"type": "lifespan.shutdown.complete"})


application = application_build()
