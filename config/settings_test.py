"""Settings for the test suite: the embedded default in a throw-away folder.

The folder must be chosen before config.env computes VAR_DIR, hence this module sits outside
the config.settings package. DATABASE_URL / REDIS_URL from the environment still apply: that
is how the service-backed run reaches MariaDB and Redis.
"""

import atexit
import os
import shutil
import tempfile

# The process that starts the run makes the folder and removes it when it exits; the servers and
# workers the tests start inherit it through the environment and make none of their own.
if "AGENTKB_VAR_DIR" not in os.environ:
    _var_dir = tempfile.mkdtemp(prefix="agentkb-test-")
    os.environ["AGENTKB_VAR_DIR"] = _var_dir
    atexit.register(shutil.rmtree, _var_dir, ignore_errors=True)
os.environ.setdefault("DEBUG", "true")
# Tests send calls faster than an agent loop does (dozens a second, here and in the servers they
# start); the per-second burst cap is off unless a test sets it (tests/security/test_budgets.py).
os.environ.setdefault("API_THROTTLE_TOOL_BURST", "")

from config.settings import *  # noqa: F403

# A database of its own per test run, so parallel runs on one MariaDB never collide.
if DATABASES["default"]["ENGINE"] == "config.db.mysql":  # noqa: F405
    DATABASES["default"]["TEST"]["NAME"] = f"test_agentkb_{os.getpid()}"  # noqa: F405

# Fast password hashing: tests create many users.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tasks run in-process unless a test starts a real worker (tests/conftest.py: celery_worker).
CELERY_TASK_ALWAYS_EAGER = True
