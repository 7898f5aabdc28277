"""gunicorn settings for the production web command, uvicorn workers over ``config.asgi``
(docs/operations.md "Web processes in production")::

    gunicorn -c config/gunicorn_conf.py -k uvicorn_worker.UvicornWorker -w 4 config.asgi:application

(``gunicorn config.wsgi -c config/gunicorn_conf.py``, sync workers, serves all but ``/mcp/``.)

Each worker loads the model, the analyser and the lexical index right after the fork, before it
takes a request (``retrieval.warmup``), so no request pays for a cold process; the timeout
leaves room for that start on a loaded machine.

Metrics: every worker writes its Prometheus metrics to files in ``PROMETHEUS_MULTIPROC_DIR``
(``var/prometheus`` when unset), so a scrape answered by any worker adds up all of them
(``observability.scrape``). The folder is cleaned when gunicorn starts, of the files of every
process that is no longer running (another live process sharing the folder, such as the MCP
uvicorn process, keeps its own), and a worker that exits is marked dead (its live gauges go; its
counts stay in the sums, as counters must).
"""

import os
import re
import sys
from pathlib import Path

timeout = 60
graceful_timeout = 30

_REPO = Path(__file__).resolve().parent.parent
# prometheus_client names a process's files "<kind>_<pid>.db" (gauges: "gauge_<mode>_<pid>.db").
_METRICS_FILE = re.compile(r"_(\d+)\.db$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def metrics_folder_prepare() -> Path:
    """Set PROMETHEUS_MULTIPROC_DIR (var/prometheus when unset) for the workers this master forks,
    create it, and remove the files of processes that no longer run. Returns the folder."""
    if str(_REPO) not in sys.path:
        sys.path.insert(0, str(_REPO))
    from config.env import VAR_DIR  # reads .env: its PROMETHEUS_MULTIPROC_DIR counts too

    folder = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or VAR_DIR / "prometheus")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for path in folder.glob("*.db"):
        match = _METRICS_FILE.search(path.name)
        if match is None or not _alive(int(match.group(1))):
            path.unlink(missing_ok=True)
    return folder


def on_starting(server):
    metrics_folder_prepare()


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def post_fork(server, worker):
    import django

    # As config.wsgi does, which the worker imports only after this hook.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from config.redis_or_memory import several_processes_problem
    from retrieval.warmup import process_warm_up

    problem = several_processes_problem(server.cfg.workers)
    if problem is not None and worker.age == 1:  # said once, by the first worker
        server.log.warning(problem)

    process_warm_up()
