"""Credentials never shown: Django's debug pages and error reports, and the log.

Django's ``SafeExceptionReporterFilter`` masks settings whose *name* says KEY, TOKEN, PASS...,
but a password inside a URL-valued setting (``REDIS_URL=redis://:secret@host``,
``CELERY_BROKER_URL``, ``DATABASE_URL``, ``MILVUS_URI``) is printed verbatim on the debug page a
request with a foreign ``Host`` produces under ``make run``. ``CredentialSafeReporterFilter``
(``DEFAULT_EXCEPTION_REPORTER_FILTER``) masks the user-info of every URL in any setting, in the
request's headers and in traceback variables; ``CredentialMaskingFormatter`` does the same for
every log line (message and traceback). The rule (credential query parameters too) is
``config.credentials.mask_credentials``.
"""

from __future__ import annotations

import logging
import re

from django.views.debug import SafeExceptionReporterFilter

from config.credentials import mask_credentials


class CredentialSafeReporterFilter(SafeExceptionReporterFilter):
    # Django's names, plus the headers that carry credentials (the tool token, cookies).
    hidden_settings = re.compile(
        "API|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|AUTHORIZATION|CREDENTIAL", flags=re.IGNORECASE
    )

    def cleanse_setting(self, key, value):
        value = super().cleanse_setting(key, value)
        if isinstance(value, str):
            return mask_credentials(value)
        return value

    def get_traceback_frame_variables(self, request, tb_frame):
        return [
            (name, mask_credentials(value) if isinstance(value, str) else value)
            for name, value in super().get_traceback_frame_variables(request, tb_frame)
        ]


class CredentialMaskingFormatter(logging.Formatter):
    """A formatter whose output never carries a URL's credentials."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_credentials(super().format(record))


class _MaskedFormatter(logging.Formatter):
    """Another formatter's output, masked (for handlers set up outside settings.LOGGING)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return mask_credentials(self.inner.format(record))


def handlers_mask_credentials(logger: logging.Logger) -> None:
    """Make every handler of ``logger`` mask credentials, keeping its own format: the Celery
    worker sets up its log handlers itself (not from settings.LOGGING), see config/celery.py."""
    for handler in logger.handlers:
        if not isinstance(handler.formatter, CredentialMaskingFormatter | _MaskedFormatter):
            handler.setFormatter(_MaskedFormatter(handler.formatter or logging.Formatter()))


def debug_banner() -> str:
    """The line ``make run`` prints about DEBUG (after ``services_banner``)."""
    from django.conf import settings

    if settings.DEBUG:
        return (
            "  DEBUG      ON (development): error pages show tracebacks and settings, credentials "
            "masked; serve on loopback only, set DEBUG=false anywhere else"
        )
    return "  DEBUG      off"


def services_banner() -> str:
    """The lines ``make run`` prints about where the parts run, passwords masked."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    host = f"{database['HOST']}/" if database.get("HOST") else ""
    parts = [
        ("database", f"{database['ENGINE'].rsplit('.', 1)[-1]} {host}{database['NAME']}"),
        ("Milvus", settings.MILVUS_URI),
        ("broker", settings.CELERY_BROKER_URL),
        ("Redis", settings.REDIS_URL or "(none: in-process cache and action memory)"),
        ("LLM", settings.LLM_BASE_URL or "(none: extractive summaries)"),
    ]
    return "\n".join(f"  {name:<10} {mask_credentials(str(where))}" for name, where in parts)
