"""The one django-environ ``Env`` every settings module reads from.

A ``.env`` file at the repository root is read if present; real environment variables win.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# Everything the embedded default writes (SQLite, milvus-lite, broker folders) lives here.
VAR_DIR = Path(env.str("AGENTKB_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
