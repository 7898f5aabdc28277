"""Queueing a Celery task by its registered name, once the current transaction commits.

The one way services queue tasks, for every app (CONVENTIONS 11 and 13):

- **By name, not by import.** A service names the task (``"knowledge.index_document"``, the
  ``name=`` of its ``@shared_task``) instead of importing the task module, so services never
  import tasks and tasks import services: one direction, held by ``.importlinter``. This module
  imports no app, so every app may use it.
- **From the app's task registry, not ``send_task``.** ``apply_async`` on the registered task
  honours ``task_always_eager`` (the embedded default and the test suite run tasks in process);
  ``send_task`` always goes to the broker. A process that has not imported the task modules
  (the web process, a command) has them autodiscovered the first time a name is missing.
- **After commit.** ``task_queue_on_commit`` sends once the caller's transaction commits (at once
  outside one): a rolled-back write queues nothing, and the worker finds the rows it is given.
  A service that sends several tasks in one callback of its own (stopping at the first refusal)
  takes the task from ``registered_task`` and calls ``.delay()`` in that callback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from celery import Task, current_app
from celery.exceptions import NotRegistered
from django.db import transaction


def registered_task(name: str) -> Task:
    """The task registered as ``name``, autodiscovering the task modules if none has it yet.

    Raises ``celery.exceptions.NotRegistered`` for a name no task carries (a typo, a renamed task).
    """
    try:
        return current_app.tasks[name]
    except NotRegistered:
        current_app.autodiscover_tasks(force=True)
        return current_app.tasks[name]


def task_queue_on_commit(
    name: str,
    *,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    countdown: float | None = None,
    on_error: Callable[[Exception], object] | None = None,
) -> None:
    """Send the task ``name`` with ``args`` / ``kwargs`` (and ``countdown`` seconds later) once
    the surrounding transaction commits: at once outside one, in process under
    ``task_always_eager``.

    ``on_error`` is called inside the ``except`` block (so ``logger.exception`` records the
    traceback) when the broker refuses the message: the write is committed by then, so the
    caller's usual answer is to log and leave the repair to a sweep. Without ``on_error`` the
    error propagates to whoever runs the on-commit callbacks. An unknown name always propagates.

    The callback is named after the function that called this one (``<caller>.<locals>.send``, as
    when each service wrote its own closure), so Django's on-commit error log and a test picking
    a commit's callbacks by name still see which service queued the task.
    """
    # Only the options given are passed on: the call is the one ``.delay()`` / ``apply_async``
    # made when services imported their tasks.
    options: dict[str, Any] = {}
    if kwargs:
        options["kwargs"] = kwargs
    if countdown is not None:
        options["countdown"] = countdown

    def send() -> None:
        task = registered_task(name)
        try:
            task.apply_async(tuple(args), **options)
        except Exception as exc:
            if on_error is None:
                raise
            on_error(exc)

    send.__qualname__ = f"{sys._getframe(1).f_code.co_qualname}.<locals>.send"
    transaction.on_commit(send)


def task_route(name: str, args: Any, kwargs: Any, options: Any, task: Task | None = None, **_: Any) -> Any:
    """Celery's router (``CELERY_TASK_ROUTES``): a task declaring ``summaries_queue = True`` (the
    LLM work) goes to ``CELERY_SUMMARIES_QUEUE``, every other to the default queue. Read at each
    send, so the queue follows the settings in force (a test's worker has queues of its own)."""
    if getattr(task, "summaries_queue", False):
        from django.conf import settings

        return {"queue": settings.CELERY_SUMMARIES_QUEUE}
    return None
