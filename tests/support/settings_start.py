"""Start Django in a fresh interpreter with some settings in its environment: how a test sees a
setting refused at start (``ImproperlyConfigured`` naming it) rather than at first use."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def django_setup(
    env_overrides: dict[str, str], *, without: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """``django.setup()`` under ``config.settings`` with ``env_overrides`` (and the variables named
    in ``without`` removed from this process's environment): the finished process, output captured."""
    env = {k: v for k, v in os.environ.items() if k not in without}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", **env_overrides})
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
