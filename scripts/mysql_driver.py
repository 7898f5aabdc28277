#!/usr/bin/env python
"""Install mysqlclient, the MySQL/MariaDB driver, when this machine can build it or needs it.

The embedded default (SQLite) needs no driver, and mysqlclient ships no Linux wheel: pip builds
it from source, which takes a C compiler, Python's headers and the MariaDB/MySQL client library
found through pkg-config. So ``make install`` runs this after installing the project:

- mysqlclient importable already: nothing to do;
- the machine can build it: ``pip install`` it (the version range is pyproject.toml's ``mysql``
  extra);
- it cannot, and DATABASE_URL (environment, else ``.env``) names MySQL: say which system
  packages to add and exit 1, so ``make test``/``make run`` stop with that message instead of a
  pip traceback;
- it cannot, and the embedded default is in use: one line saying so, exit 0.

Run with the project's venv Python (stdlib only): ``.venv/bin/python scripts/mysql_driver.py``.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
# The names mysqlclient's build asks pkg-config for, in its order.
PKG_CONFIG_NAMES = ("mysqlclient", "mariadb", "libmariadb", "perconaserverclient")
SYSTEM_PACKAGES = {
    "Debian/Ubuntu": "apt-get install pkg-config libmariadb-dev gcc python3-dev",
    "Fedora/RHEL": "dnf install pkgconf-pkg-config mariadb-connector-c-devel gcc python3-devel",
    "macOS": "brew install pkg-config mariadb-connector-c",
}


def database_url() -> str:
    """DATABASE_URL as the settings read it: the environment first, else the repository's .env."""
    if "DATABASE_URL" in os.environ:
        return os.environ["DATABASE_URL"]
    env_file = ROOT / ".env"
    if env_file.is_file():
        for line in env_file.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and key.strip().removeprefix("export ").strip() == "DATABASE_URL":
                return value.strip().strip("'\"")
    return ""


def mysql_wanted(url: str) -> bool:
    # django-environ's MySQL schemes: mysql, mysql2, mysqlgis, mysql-connector.
    return urlsplit(url.strip()).scheme.lower().startswith("mysql")


def driver_spec() -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]["mysql"]
    return next(spec for spec in extras if spec.lower().startswith("mysqlclient"))


def build_blockers() -> list[str]:
    """What this machine lacks to build mysqlclient from source (empty: it can)."""
    missing = []
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")[:1] or ["cc"]
    if not shutil.which(compiler[0]):
        missing.append(f"a C compiler ({compiler[0]})")
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not include.is_file():
        missing.append(f"Python's C headers ({include})")
    if not (os.environ.get("MYSQLCLIENT_CFLAGS") and os.environ.get("MYSQLCLIENT_LDFLAGS")):
        pkg_config = shutil.which("pkg-config")
        if pkg_config is None:
            missing.append("pkg-config")
        elif not any(
            subprocess.run([pkg_config, "--exists", name], capture_output=True).returncode == 0
            for name in PKG_CONFIG_NAMES
        ):
            missing.append(f"the MariaDB/MySQL client library for pkg-config ({', '.join(PKG_CONFIG_NAMES)})")
    return missing


def how_to_add() -> str:
    lines = [f"    {system}: {command}" for system, command in SYSTEM_PACKAGES.items()]
    return "\n".join(["  Add the system packages, then run `make install` again:", *lines])


def main() -> int:
    if importlib.util.find_spec("MySQLdb") is not None:
        return 0
    url = database_url()
    needed = mysql_wanted(url)
    blockers = build_blockers()
    if blockers:
        if needed:
            print(
                f"mysqlclient (the MySQL/MariaDB driver) is needed for DATABASE_URL={urlsplit(url).scheme}://... "
                f"but cannot be built here: missing {'; '.join(blockers)}.\n{how_to_add()}\n"
                "  (Or unset DATABASE_URL to use the embedded default, SQLite.)",
                file=sys.stderr,
            )
            return 1
        print(
            "mysqlclient (the MySQL/MariaDB driver) not installed: the embedded default (SQLite) does "
            "not need it. For DATABASE_URL=mysql://... add pkg-config libmariadb-dev gcc python3-dev "
            "(Debian/Ubuntu) and run `make install` again."
        )
        return 0
    spec = driver_spec()
    print(f"installing {spec} (the MySQL/MariaDB driver; this machine can build it)")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", spec],
        capture_output=True,
        text=True,
    )
    if result.returncode == 0:
        return 0
    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
    print(f"pip could not build {spec}:\n{tail}\n{how_to_add()}", file=sys.stderr)
    return 1 if needed else 0


if __name__ == "__main__":
    sys.exit(main())
