"""Production refuses unsafe settings: `manage.py check --deploy` fails on the development
SECRET_KEY published in this repository, on ALLOWED_HOSTS containing `*` and on DEBUG; and a
client reaching the server directly cannot claim HTTPS unless a trusted proxy is named."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from config.settings.core import _DEVELOPMENT_SECRET_KEY
from tests.conftest import REPO

# Variables the caller's environment must not lend to the production process.
_CLEARED = ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL", "TRUSTED_PROXY_SSL_HEADER")


def _run(args: list[str], tmp_path, settings_module="config.settings_production", **env: str):
    base = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env={**base, "DJANGO_SETTINGS_MODULE": settings_module, "AGENTKB_VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _check_deploy(tmp_path, **env: str) -> subprocess.CompletedProcess:
    return _run(["manage.py", "check", "--deploy"], tmp_path, **env)


SAFE = {"ALLOWED_HOSTS": "kb.example.com", "SECRET_KEY": secrets.token_urlsafe(50)}


def test_check_deploy_refuses_the_published_development_secret_key(tmp_path):
    # Given: production settings whose SECRET_KEY was copied from the repository
    # When: the deploy check runs
    result = _check_deploy(tmp_path, **{**SAFE, "SECRET_KEY": _DEVELOPMENT_SECRET_KEY})
    # Then: it fails, naming the key
    assert result.returncode != 0
    assert "agentkb.E001" in result.stderr and "SECRET_KEY" in result.stderr


def test_check_deploy_refuses_a_wildcard_allowed_host(tmp_path):
    result = _check_deploy(tmp_path, **{**SAFE, "ALLOWED_HOSTS": "kb.example.com,*"})
    assert result.returncode != 0
    assert "agentkb.E002" in result.stderr and "ALLOWED_HOSTS contains '*'" in result.stderr


def test_check_deploy_refuses_debug(tmp_path):
    # Production settings refuse DEBUG before any check runs ...
    refused = _check_deploy(tmp_path, DEBUG="true", **SAFE)
    assert refused.returncode != 0 and "DEBUG is on, which production settings refuse" in refused.stderr
    # ... and the deploy check refuses it under any settings module.
    result = _run(["manage.py", "check", "--deploy"], tmp_path, "config.settings", DEBUG="true", **SAFE)
    assert result.returncode != 0
    assert "agentkb.E003" in result.stderr


@pytest.mark.parametrize(
    ("overrides", "check_id"),
    [
        ({"SECRET_KEY": _DEVELOPMENT_SECRET_KEY, "DEBUG": False}, "agentkb.E001"),
        ({"SECRET_KEY_FALLBACKS": ["django-insecure-" + "x" * 50], "DEBUG": False}, "agentkb.E001"),
        ({"ALLOWED_HOSTS": ["*"], "DEBUG": False}, "agentkb.E002"),
        ({"DEBUG": True}, "agentkb.E003"),
    ],
)
def test_each_unsafe_setting_is_an_error_of_the_deploy_check(settings, overrides, check_id):
    settings.SECRET_KEY = SAFE["SECRET_KEY"]
    settings.ALLOWED_HOSTS = ["kb.example.com"]
    for name, value in overrides.items():
        setattr(settings, name, value)
    with pytest.raises(SystemCheckError) as refused:
        call_command("check", deploy=True, tags=["security"])
    assert check_id in str(refused.value)


# --- HTTPS claimed by a header -------------------------------------------------------------------
# A request to the API over plain HTTP, claiming HTTPS in X-Forwarded-Proto: redirected to HTTPS
# (301) unless the header is trusted, then answered (401: no token).
_CLAIM_HTTPS = (
    "import django; django.setup();"
    "from django.conf import settings; from django.test import Client;"
    "r = Client().get('/api/knowledge-map', HTTP_HOST='kb.example.com', HTTP_X_FORWARDED_PROTO='https');"
    "print(getattr(settings, 'SECURE_PROXY_SSL_HEADER', None), r.status_code)"
)


def test_a_client_reaching_the_server_directly_cannot_claim_https(tmp_path):
    result = _run(["-c", _CLAIM_HTTPS], tmp_path, **SAFE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["None", "301"]


def test_a_named_trusted_proxy_header_makes_a_request_https(tmp_path):
    result = _run(["-c", _CLAIM_HTTPS], tmp_path, TRUSTED_PROXY_SSL_HEADER="X-Forwarded-Proto", **SAFE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "401"
    assert "HTTP_X_FORWARDED_PROTO" in result.stdout


def test_a_malformed_trusted_proxy_header_stops_start_up(tmp_path):
    result = _run(["-c", _CLAIM_HTTPS], tmp_path, TRUSTED_PROXY_SSL_HEADER="X-Forwarded-Proto: https", **SAFE)
    assert result.returncode != 0
    assert "TRUSTED_PROXY_SSL_HEADER must be a header name" in result.stderr
