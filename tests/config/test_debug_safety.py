"""Debug pages and logs never show credentials: a hostile request with a foreign Host under
DEBUG (what `make run` serves) gets Django's debug page, with every URL's password masked."""

import logging

import pytest
from django.conf import settings as django_settings

from config.debug import CredentialMaskingFormatter, CredentialSafeReporterFilter, debug_banner

SECRET = "hunter2-s3cret"


@pytest.mark.django_db
def test_a_foreign_host_debug_page_masks_passwords_inside_url_settings(client, settings):
    settings.DEBUG = True
    settings.REDIS_URL = f"redis://:{SECRET}@127.0.0.1:6379/0"
    settings.CELERY_BROKER_URL = f"redis://agentkb:{SECRET}@127.0.0.1:6379/1"
    settings.MILVUS_URI = f"https://root:{SECRET}@milvus.internal:19530"
    settings.EXTRA_LIST_SETTING = [f"amqp://guest:{SECRET}@rabbit/"]
    # A staff path: under /api/ a foreign Host is answered in JSON (config/middleware.py).
    response = client.get("/admin/login/", HTTP_HOST="evil.example")
    page = response.content.decode()
    assert response.status_code == 400
    assert "DisallowedHost" in page and "REDIS_URL" in page  # the debug page, settings listed
    assert SECRET not in page
    assert "redis://:********@127.0.0.1:6379/0" in page
    assert "redis://agentkb:********@127.0.0.1:6379/1" in page


def test_the_filter_masks_nested_settings_and_keeps_urls_without_credentials():
    cleansed = CredentialSafeReporterFilter().cleanse_setting(
        "CACHES", {"default": {"LOCATION": f"redis://:{SECRET}@h/0", "OPTIONS": {"x": ["http://a/b"]}}}
    )
    assert cleansed == {"default": {"LOCATION": "redis://:********@h/0", "OPTIONS": {"x": ["http://a/b"]}}}


def test_log_lines_and_tracebacks_are_masked():
    formatter = CredentialMaskingFormatter("%(message)s")
    try:
        raise ConnectionError(f"cannot reach redis://:{SECRET}@10.0.0.5:6379/0")
    except ConnectionError:
        import sys

        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "broker %s", (f"amqp://u:{SECRET}@b/",), sys.exc_info()
        )
    text = formatter.format(record)
    assert SECRET not in text and "amqp://u:********@b/" in text and "redis://:********@10.0.0.5" in text
    # The project's log configuration uses it.
    assert django_settings.LOGGING["formatters"]["plain"]["()"] == "config.debug.CredentialMaskingFormatter"
    assert django_settings.DEFAULT_EXCEPTION_REPORTER_FILTER == "config.debug.CredentialSafeReporterFilter"


def test_make_run_says_when_debug_is_on(settings):
    settings.DEBUG = True
    assert debug_banner().strip().startswith("DEBUG      ON")
    settings.DEBUG = False
    assert debug_banner().strip() == "DEBUG      off"
