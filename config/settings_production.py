"""Production settings: ``DJANGO_SETTINGS_MODULE=config.settings_production``.

The same settings as ``config.settings`` (every value from the environment), except that DEBUG
is off by default and refused when set: a production process never serves tracebacks or
development defaults. With DEBUG off, ``config.settings.core`` requires SECRET_KEY and
ALLOWED_HOSTS and turns on HTTPS-only cookies, HSTS and the SSL redirect, so
``python manage.py check --deploy`` is clean.

It sits beside the config.settings package (like settings_test) because DEBUG must be decided
before that package is imported.
"""

import os

from django.core.exceptions import ImproperlyConfigured

from config.env import env

if env.bool("DEBUG", default=False):
    raise ImproperlyConfigured(
        "DEBUG is on, which production settings refuse (it shows tracebacks and settings to anyone): "
        "unset DEBUG or set DEBUG=false, or use DJANGO_SETTINGS_MODULE=config.settings for development."
    )
os.environ["DEBUG"] = "false"

from config.settings import *  # noqa: F403
