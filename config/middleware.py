"""Every error under ``/api/``, ``/mcp/`` and ``/healthz`` is JSON, in DEBUG and production alike.

Django answers some requests before any API view runs, and in HTML: a Host not in ALLOWED_HOSTS
(``DisallowedHost``), a query string of more than DATA_UPLOAD_MAX_NUMBER_FIELDS parameters
(``TooManyFieldsSent``; under DEBUG the debug page itself fails on it, a 500), a path no URL
matches (404, a missing or extra trailing slash too), a method a plain view refuses (405), an
uncaught exception (500). ``JsonErrorsMiddleware``, first in MIDDLEWARE:

- answers a foreign Host under those prefixes itself, before anything reads it: 400 ``bad_host``
  (as the MCP guard does);
- answers a query string with too many parameters itself, on every path: 400
  ``too_many_parameters`` under those prefixes, the URLconf's 400 page elsewhere, so a staff
  page answers 400, never the 500 of a debug page that cannot show the request;
- answers an uncaught database, Redis or broker failure under those prefixes 503 with the part
  named and ``Retry-After`` (``config.outages``): an outage, not a bug;
- turns any other error answer under those prefixes that is not JSON into the API's one format,
  ``{"error": {"code", "message", "details"}}`` (``config.exception_handlers.error_body``),
  keeping its status and its Allow / WWW-Authenticate / Retry-After headers.

Under ``/api/dify/`` the format is Dify's, ``{"error_code", "error_msg"}`` (codes as
``retrieval.entrypoints.dify_api``: 3001 bad request, 3003 too large; 3004 no such endpoint, 5000 server
error are this module's). Answers that already are JSON (every DRF view's) pass unchanged.

Under ASGI (``config.asgi``) ``/mcp`` never reaches Django: the MCP guard answers there. The
prefix is listed for a WSGI server, where ``/mcp/`` is a Django 404 like any unknown path.
"""

from __future__ import annotations

import logging
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import DisallowedHost, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.urls import get_resolver, get_urlconf, is_valid_path
from django.utils.deprecation import MiddlewareMixin

from config.exception_handlers import error_body
from config.outages import RETRY_AFTER_SECONDS, request_outage

JSON_PREFIXES = ("/api/", "/mcp/", "/healthz/")
DIFY_PREFIX = "/api/dify/"
# Headers an error answer keeps when it is rewritten as JSON.
_KEPT_HEADERS = ("Allow", "WWW-Authenticate", "Retry-After")
# code and message of an error answer by status (others: the status phrase).
_BY_STATUS = {
    400: ("bad_request", "Bad request."),
    401: ("not_authenticated", "Authentication credentials were not provided."),
    403: ("permission_denied", "You do not have permission to perform this action."),
    404: ("not_found", "No API endpoint at this path."),
    405: ("method_not_allowed", "Method not allowed."),
    413: ("request_too_large", "The request body is too large."),
    500: ("server_error", "Server error: it is logged; try again later."),
}
_DIFY_CODES = {400: 3001, 404: 3004, 405: 3001, 413: 3003, 429: 3002, 503: 5001}


def json_errors_path(path: str) -> bool:
    """Whether errors on ``path`` (a request's ``path_info``) are answered as JSON."""
    return any(path == prefix.rstrip("/") or path.startswith(prefix) for prefix in JSON_PREFIXES)


def _json_error(
    request: HttpRequest, status: int, code: str, message: str, details: dict | None = None
) -> JsonResponse:
    if request.path_info.startswith(DIFY_PREFIX):
        dify_code = _DIFY_CODES.get(status, 5000 if status >= 500 else 3001)
        return JsonResponse({"error_code": dify_code, "error_msg": message}, status=status)
    return JsonResponse(error_body(code, message, details or {}), status=status)


def _log_suspicious(request: HttpRequest, exc: Exception) -> None:
    # Where Django logs what it refuses itself, so monitoring still sees it.
    logging.getLogger(f"django.security.{type(exc).__name__}").error(
        str(exc), extra={"status_code": 400, "request": request}
    )


class JsonErrorsMiddleware(MiddlewareMixin):
    """See the module docstring."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        json_errors = json_errors_path(request.path_info)
        if json_errors:
            try:
                request.get_host()
            except DisallowedHost as exc:
                _log_suspicious(request, exc)
                host = request.META.get("HTTP_HOST", "")[:200]
                return _json_error(request, 400, "bad_host", f"Host {host!r} is not allowed (ALLOWED_HOSTS).")
        try:
            request.GET  # noqa: B018 - parsing it is the check
        except TooManyFieldsSent as exc:
            _log_suspicious(request, exc)
            limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
            if json_errors:
                return _json_error(
                    request,
                    400,
                    "too_many_parameters",
                    f"The query string has more than {limit:,} parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS).",
                )
            request.GET = QueryDict()  # the 400 page must not trip over it again
            return get_resolver(get_urlconf()).resolve_error_handler(400)(request, exc)
        return None

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.status_code < 400 or not json_errors_path(request.path_info) or _is_json(response):
            return response
        status = response.status_code
        part = request_outage(request) if status == 500 else None
        if part is not None:
            # A dependency's outage, not a bug: 503 naming it, and when to try again.
            outage = _json_error(
                request,
                503,
                f"{part}_unavailable",
                f"The {part} does not answer; try again in a few seconds.",
                {"part": part},
            )
            outage["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return outage
        code, message = _BY_STATUS.get(status, (None, None))
        if code is None:
            phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
            code, message = phrase.lower().replace(" ", "_").replace("-", "_"), f"{phrase}."
        details: dict = {}
        if status == 404:
            details = _did_you_mean(request)
            if details:
                message = f"No API endpoint at this path; did you mean {details['did_you_mean']}?"
        elif status == 405:
            allowed = [m.strip() for m in response.get("Allow", "").split(",") if m.strip()]
            message = f'Method "{request.method}" not allowed.'
            details = {"allowed": allowed} if allowed else {}
        rewritten = _json_error(request, status, code, message, details)
        for header in _KEPT_HEADERS:
            if header in response:
                rewritten[header] = response[header]
        return rewritten


def _is_json(response: HttpResponse) -> bool:
    content_type = response.get("Content-Type", "").split(";")[0].strip().lower()
    return content_type == "application/json" or content_type.endswith("+json")


def _did_you_mean(request: HttpRequest) -> dict:
    """The same path with the trailing slash added or removed, when that one exists."""
    path = request.path_info
    other = path.rstrip("/") if path.endswith("/") else path + "/"
    if other and other != path and is_valid_path(other, get_urlconf()):
        return {"did_you_mean": request.path[: len(request.path) - len(path)] + other}
    return {}
