"""scripts/mysql_driver.py and the settings: the MySQL driver is optional, and its absence is
explained, not a pip or import traceback. MySQLdb is hidden from the child processes
(``sys.modules["MySQLdb"] = None``) so the venv's own mysqlclient does not answer for it."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

HIDE_DRIVER = "import sys; sys.modules['MySQLdb'] = None; "
RUN_SCRIPT = HIDE_DRIVER + "import runpy; runpy.run_path('scripts/mysql_driver.py', run_name='__main__')"
DEBIAN_PACKAGES = "pkg-config libmariadb-dev gcc python3-dev"


def _run(code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        # pkg-config finds no MariaDB: a machine without the client headers.
        env={**clean, "PKG_CONFIG_LIBDIR": "/nonexistent", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_embedded_default_installs_without_the_driver_and_says_how_to_add_it():
    result = _run(RUN_SCRIPT, DATABASE_URL="")
    assert result.returncode == 0, result.stderr
    assert "embedded default (SQLite) does not need it" in result.stdout
    assert DEBIAN_PACKAGES in result.stdout


def test_a_mysql_database_url_without_headers_stops_naming_the_packages():
    result = _run(RUN_SCRIPT, DATABASE_URL="mysql://root@127.0.0.1:3306/agentkb")
    assert result.returncode == 1
    assert "mysqlclient (the MySQL/MariaDB driver) is needed for DATABASE_URL=mysql://" in result.stderr
    assert "the MariaDB/MySQL client library for pkg-config" in result.stderr
    assert f"apt-get install {DEBIAN_PACKAGES}" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_installed_driver_is_left_alone():
    # Where the venv has mysqlclient (built when the headers were there): nothing to do or say.
    pytest.importorskip("MySQLdb", reason="mysqlclient is not installed in this venv")
    result = subprocess.run(
        [sys.executable, "scripts/mysql_driver.py"],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": "mysql://root@127.0.0.1:3306/agentkb"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_settings_with_a_mysql_url_and_no_driver_name_the_packages():
    result = _run(
        HIDE_DRIVER + "import django; django.setup()",
        DATABASE_URL="mysql://root@127.0.0.1:3306/agentkb",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    assert result.returncode != 0
    assert "DATABASE_URL names MySQL/MariaDB but mysqlclient is not installed" in result.stderr
    assert DEBIAN_PACKAGES in result.stderr
