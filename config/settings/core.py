"""Django core: security, apps, middleware, templates, static files, i18n."""

import re

from django.core.exceptions import ImproperlyConfigured

from config.env import BASE_DIR, VAR_DIR, env

DEBUG = env.bool("DEBUG", default=True)

# Development only: a fixed key so sessions survive restarts of `make run`. It is published with
# the code, so `check --deploy` refuses it (config/checks.py).
_DEVELOPMENT_SECRET_KEY = "agentkb-insecure-development-key-change-me-0123456789"

if DEBUG:
    SECRET_KEY = env.str("SECRET_KEY", default=_DEVELOPMENT_SECRET_KEY)
    ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
else:
    # Production secrets have no default: a missing one stops start-up with the variable named.
    if not env.str("SECRET_KEY", default=""):
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (see .env.example).")
    if not env.list("ALLOWED_HOSTS", default=[]):
        raise ImproperlyConfigured(
            "ALLOWED_HOSTS must be set when DEBUG is off, e.g. ALLOWED_HOSTS=kb.example.com (see .env.example)."
        )
    SECRET_KEY = env.str("SECRET_KEY")
    ALLOWED_HOSTS = env.list("ALLOWED_HOSTS")
    CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
    # A request counts as HTTPS when it arrived over TLS, or when a proxy in front says so in the
    # header named here (e.g. X-Forwarded-Proto: https). Trusting such a header is only safe when
    # every request passes through that proxy and it sets or strips the header: a client reaching
    # the server directly could claim HTTPS otherwise. Unset: no header is trusted.
    _proxy_ssl_header = env.str("TRUSTED_PROXY_SSL_HEADER", default="").strip()
    if _proxy_ssl_header:
        if not re.fullmatch(r"[A-Za-z0-9]+(-[A-Za-z0-9]+)*", _proxy_ssl_header):
            raise ImproperlyConfigured(
                f"TRUSTED_PROXY_SSL_HEADER must be a header name such as X-Forwarded-Proto; got '{_proxy_ssl_header}'"
            )
        SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https")
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 30)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True

INSTALLED_APPS = [
    # The project's own start-up and deploy checks (config/checks.py).
    "config.apps.ProjectConfig",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "knowledge",
    "retrieval",
    "observability",
]

MIDDLEWARE = [
    # First: errors under /api/, /mcp/ and /healthz answered as JSON, a foreign Host and a query
    # string of too many parameters refused before anything else reads them (config/middleware.py).
    "config.middleware.JsonErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files: compressed copies and far-future cache headers for hashed names (after
    # collectstatic); straight from the finders otherwise (config/staticfiles.py).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = env.str("LANGUAGE_CODE", default="en")
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.str("STATIC_ROOT", default=str(VAR_DIR / "static"))
STATICFILES_DIRS = [p for p in [BASE_DIR / "static"] if p.exists()]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # plotly.js for the admin dashboards, straight from the plotly package (observability/staticfiles.py).
    "observability.staticfiles.PlotlyFinder",
]

# Debug pages and error reports mask credentials inside URL-valued settings too (config.debug).
DEFAULT_EXCEPTION_REPORTER_FILTER = "config.debug.CredentialSafeReporterFilter"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "config.staticfiles.StaticStorage"},
}
# Serve from the finders too: a checkout that never ran collectstatic still has its admin pages.
WHITENOISE_USE_FINDERS = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            # Masks credentials inside URLs (redis://:secret@...) in every line, tracebacks included.
            "()": "config.debug.CredentialMaskingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        }
    },
    # Budget refusals: one INFO line per agent (or refused address) per minute, not one WARNING
    # per refused call (config/refusal_logging.py).
    "filters": {"refusals": {"()": "config.refusal_logging.RefusalsOncePerWindow"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # Django's own loggers through the same masking handler (its default one would not mask).
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.request": {"filters": ["refusals"], "level": "INFO"},
        # pymilvus logs every connection at INFO; keep the console readable.
        "pymilvus": {"level": "WARNING"},
        "milvus_lite": {"level": "WARNING"},
    },
}
