"""The Celery app. Broker and options come from Django settings (CELERY_* names)."""

import os
from pathlib import Path

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("agentkb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def ensure_filesystem_broker_folders() -> None:
    """The filesystem transport needs its folders before the first message is sent."""
    options = app.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)


if str(app.conf.broker_url or "").startswith("filesystem://"):
    ensure_filesystem_broker_folders()


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _worker_logs_mask_credentials(logger=None, **kwargs) -> None:
    # The worker replaces the root logger's handlers with its own: mask there too (an httpx line
    # "HTTP Request: POST https://…?api_key=…", a broker URL with its password).
    from config.debug import handlers_mask_credentials

    if logger is not None:
        handlers_mask_credentials(logger)


@signals.worker_process_init.connect
def _warm_up_pool_process(**kwargs) -> None:
    # Each pool process loads the model and the analyser before its first task, not during it.
    from retrieval.warmup import process_warm_up

    process_warm_up()


@signals.worker_init.connect
def _survive_broker_restarts(**kwargs) -> None:
    # See config/celery_reconnect.py: Celery 5.7.0 ends the worker when Redis restarts while it
    # holds an unacknowledged message.
    from config.celery_reconnect import guard_consumer_reconnect

    guard_consumer_reconnect()
