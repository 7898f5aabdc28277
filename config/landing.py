"""``/``: a small page saying what this service is and where its parts are (the staff admin,
the API documentation, the health check, MCP), instead of a 404 for whoever opens the address
`make run` printed. Static: it reads no database and needs no login."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    return render(request, "landing.html")
