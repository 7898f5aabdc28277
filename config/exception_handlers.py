"""One error format for the whole API: {"error": {"code", "message", "details"}}."""

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler


def _first_message(details: Any) -> str:
    """A readable one-liner naming the first field at fault, e.g. "query: This field is required."."""
    if isinstance(details, dict):
        for field, value in details.items():
            inner = _first_message(value)
            return inner if field == "non_field_errors" else f"{field}: {inner}"
    if isinstance(details, list) and details:
        return _first_message(details[0])
    return str(details)


def error_body(code: str, message: str, details: Any = None) -> dict:
    """The API's one error format (also written by ``config.middleware`` for errors Django
    answers before any API view runs)."""
    return {"error": {"code": code, "message": message, "details": details if details is not None else {}}}


class RequestTooLarge(exceptions.APIException):
    status_code = 413
    default_code = "request_too_large"


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, RequestDataTooBig):
        # Django's own answer is a bare HTML 400; agents get the API's error format.
        exc = RequestTooLarge(
            {
                "body": [
                    f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes "
                    "(DATA_UPLOAD_MAX_MEMORY_SIZE)."
                ]
            }
        )
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = exception_handler(exc, context)
    if response is None:
        return None

    if isinstance(exc, exceptions.ValidationError):
        code, message, details = "invalid", _first_message(exc.detail), exc.detail
    else:
        code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        if not isinstance(code, str):
            code = getattr(exc, "default_code", "error")
        message = _first_message(getattr(exc, "detail", str(exc)))
        details = {}
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            details = {"retry_after_seconds": int(exc.wait)}

    response.data = error_body(code, message, details)
    return response
