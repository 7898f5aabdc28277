"""The relational database: SQLite under var/ by default, MySQL/MariaDB via DATABASE_URL."""

import importlib.util

from django.core.exceptions import ImproperlyConfigured

from config.env import VAR_DIR, env

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'agentkb.sqlite3'}"),
}

_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.mysql":
    if importlib.util.find_spec("MySQLdb") is None:
        # mysqlclient is optional (it needs system packages to build): say what to add.
        raise ImproperlyConfigured(
            "DATABASE_URL names MySQL/MariaDB but mysqlclient is not installed. Add the system "
            "packages it builds with (Debian/Ubuntu: pkg-config libmariadb-dev gcc python3-dev), "
            "then run `make install` (or: pip install -e '.[mysql]')."
        )
    # utf8mb4 so Chinese text and emoji survive; strict mode so truncation is an error, not silent.
    _db.setdefault("OPTIONS", {})
    _db["OPTIONS"].setdefault("charset", "utf8mb4")
    _db["OPTIONS"].setdefault("init_command", "SET sql_mode='STRICT_TRANS_TABLES'")
    # A hung server fails a request in seconds instead of holding it until gunicorn kills the
    # worker (the client's defaults wait forever); reads and writes get room for a slow query.
    _db["OPTIONS"].setdefault("connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", default=2))
    _db["OPTIONS"].setdefault("read_timeout", env.int("DATABASE_READ_TIMEOUT", default=15))
    _db["OPTIONS"].setdefault("write_timeout", env.int("DATABASE_READ_TIMEOUT", default=15))
    _db.setdefault("TEST", {})
    _db["TEST"].setdefault("CHARSET", "utf8mb4")
    _db["TEST"].setdefault("COLLATION", "utf8mb4_unicode_ci")
    _db["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
    _db["CONN_HEALTH_CHECKS"] = True
    # Django's backend with a circuit breaker on connecting: once the server has not answered,
    # new connections fail at once for DEPENDENCY_BREAKER_SECONDS (config/db/mysql/base.py).
    _db["ENGINE"] = "config.db.mysql"
elif _db["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes.
    _db.setdefault("OPTIONS", {})
    _db["OPTIONS"].setdefault("init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
    # SQLite's busy timeout: how long a write waits for the other process's write lock.
    _db["OPTIONS"].setdefault("timeout", env.float("DATABASE_BUSY_TIMEOUT", default=20.0))
    # A transaction that reads, then writes (select_for_update, get_or_create) fails at once with
    # "database is locked" when the other process holds the write lock (SQLite cannot wait there
    # without risking a deadlock); taking the write lock at BEGIN makes it wait up to `timeout`.
    _db["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")
    # Reuse connections here too: opening one per request (and closing the last one, which makes
    # SQLite checkpoint its WAL) cost lookups 5-20 ms each (bench/lookup.py at 1,000 chunks).
    _db["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)

# Under ASGI (uvicorn, gunicorn's uvicorn workers) each process runs Django's synchronous parts on
# this many long-lived threads, one request at a time each, so their connections are kept as above
# instead of opened per request (config/asgi_lanes.py). A process holds at most this many
# connections; more concurrent requests wait on the event loop for a free thread.
WEB_DJANGO_THREADS = env.int("WEB_DJANGO_THREADS", default=8)
if WEB_DJANGO_THREADS < 1:
    raise ImproperlyConfigured(f"WEB_DJANGO_THREADS must be at least 1; got {WEB_DJANGO_THREADS}")
