"""Credentials never shown: Django's debug pages and error reports, and the log.

Django's ``SafeExceptionReporterFilter`` masks settings whose *name* says KEY, TOKEN, PASS...,
but a password inside a URL-valued setting (``REDIS_URL=redis://:secret@host``,
``CELERY_BROKER_URL``, ``DATABASE_URL``, ``MILVUS_URI``) is printed verbatim on the debug page a
request with a foreign ``Host`` produces under ``make run``. ``CredentialSafeReporterFilter``
(``DEFAULT_EXCEPTION_REPORTER_FILTER``) masks the user-info of every URL in any setting, in the
request's headers and in traceback variables; ``CredentialMaskingFormatter`` does the same for
every log line (message and traceback).
"""

from __future__ import annotations

import logging
import re

from django.views.debug import SafeExceptionReporterFilter

MASK = "********"
# scheme://user:password@  or  scheme://:password@  or  scheme://token@ (user-info alone).
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s@'\"<>]+)@")


def mask_url_credentials(text: str) -> str:
    """``text`` with the user-info of every URL in it replaced by a mask (the user name kept)."""

    def masked(match: re.Match) -> str:
        user, sep, _password = match["userinfo"].partition(":")
        kept = f"{user}:{MASK}" if sep else MASK
        return f"{match['scheme']}{kept}@"

    return _URL_USERINFO.sub(masked, text)


class CredentialSafeReporterFilter(SafeExceptionReporterFilter):
    # Django's names, plus the headers that carry credentials (the tool token, cookies).
    hidden_settings = re.compile(
        "API|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|AUTHORIZATION|CREDENTIAL", flags=re.IGNORECASE
    )

    def cleanse_setting(self, key, value):
        value = super().cleanse_setting(key, value)
        if isinstance(value, str):
            return mask_url_credentials(value)
        return value

    def get_traceback_frame_variables(self, request, tb_frame):
        return [
            (name, mask_url_credentials(value) if isinstance(value, str) else value)
            for name, value in super().get_traceback_frame_variables(request, tb_frame)
        ]


class CredentialMaskingFormatter(logging.Formatter):
    """A formatter whose output never carries a URL's credentials."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_url_credentials(super().format(record))


def debug_banner() -> str:
    """The line ``make run`` prints about DEBUG."""
    from django.conf import settings

    if settings.DEBUG:
        return (
            "  DEBUG      ON (development): error pages show tracebacks and settings, credentials "
            "masked; serve on loopback only, set DEBUG=false anywhere else"
        )
    return "  DEBUG      off"
