"""gunicorn settings for the production web command, uvicorn workers over ``config.asgi``
(docs/operations.md "Web processes in production")::

    gunicorn -c config/gunicorn_conf.py -k uvicorn_worker.UvicornWorker -w 4 config.asgi:application

(``gunicorn config.wsgi -c config/gunicorn_conf.py``, sync workers, serves all but ``/mcp/``.)

Each worker loads the model, the analyser and the lexical index right after the fork, before it
takes a request (``retrieval.warmup``), so no request pays for a cold process; the timeout
leaves room for that start on a loaded machine.
"""

timeout = 60
graceful_timeout = 30


def post_fork(server, worker):
    import os

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
