"""The project's deploy checks (``python manage.py check --deploy``): settings that must never
reach production. Each is an error, so the command exits non-zero and a deploy script stops.

- agentkb.E001: SECRET_KEY (or one of SECRET_KEY_FALLBACKS) is a published key: the development
  default in this repository, or a Django ``startproject`` key (``django-insecure-...``). Anyone
  with the code could sign sessions and password-reset links with it;
- agentkb.E002: ALLOWED_HOSTS contains ``*``: any Host header is accepted, so links built from it
  (password resets, redirects) can point anywhere, and the Host checks of the API and of MCP
  accept any name;
- agentkb.E003: DEBUG is on: error pages show tracebacks, settings and the request to anyone.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks

from config.settings.core import _DEVELOPMENT_SECRET_KEY

PUBLISHED_SECRET_KEYS = frozenset({_DEVELOPMENT_SECRET_KEY})


def _published(key: object) -> bool:
    return isinstance(key, str) and (key in PUBLISHED_SECRET_KEYS or key.startswith("django-insecure-"))


@checks.register(checks.Tags.security, deploy=True)
def production_settings_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    keys = [getattr(settings, "SECRET_KEY", ""), *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    if any(_published(key) for key in keys):
        errors.append(
            checks.Error(
                "SECRET_KEY (or SECRET_KEY_FALLBACKS) is a published key, e.g. the development key of "
                "config/settings/core.py: anyone with the code can sign sessions with it.",
                hint="Set SECRET_KEY to a long random string: "
                "python -c 'import secrets; print(secrets.token_urlsafe(50))'.",
                id="agentkb.E001",
            )
        )
    if "*" in settings.ALLOWED_HOSTS:
        errors.append(
            checks.Error(
                "ALLOWED_HOSTS contains '*': every Host header is accepted.",
                hint="List the host names agentkb is served under, e.g. ALLOWED_HOSTS=kb.example.com.",
                id="agentkb.E002",
            )
        )
    if settings.DEBUG:
        errors.append(
            checks.Error(
                "DEBUG is on: error pages show tracebacks, settings and requests to anyone.",
                hint="Unset DEBUG (or DEBUG=false); config.settings_production refuses it.",
                id="agentkb.E003",
            )
        )
    return errors
