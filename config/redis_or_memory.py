"""State every web process must see alike (the agents' call budgets, the open MCP sessions): kept
in Redis when the default cache is django-redis (REDIS_URL set), else in this process's memory,
which is enough for the embedded default's one process. The one place that choice is made."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from django.conf import settings

T = TypeVar("T")


def default_cache_is_redis() -> bool:
    return settings.CACHES["default"]["BACKEND"].startswith("django_redis.")


def several_processes_problem(processes: int) -> str | None:
    """What goes wrong when ``processes`` web processes keep this state in memory, or None when
    they share it (Redis) or there is one."""
    if processes <= 1 or default_cache_is_redis():
        return None
    return (
        f"{processes} web workers without REDIS_URL: each keeps its own MCP sessions, action "
        "memory and call budgets, so a session opened on one worker is unknown to the others "
        "(404) and each budget counts per worker; set REDIS_URL or run one worker"
    )


class RedisOrMemory(Generic[T]):
    """This process's one object built by ``redis()`` or by ``memory()``, chosen on first use (so
    the settings in force then decide, not those at import); ``reset()`` forgets it (tests that
    swap the cache)."""

    def __init__(self, *, redis: Callable[[], T], memory: Callable[[], T]) -> None:
        self._redis = redis
        self._memory = memory
        self._chosen: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        chosen = self._chosen
        if chosen is None:
            with self._lock:
                if self._chosen is None:
                    self._chosen = self._redis() if default_cache_is_redis() else self._memory()
                chosen = self._chosen
        return chosen

    def reset(self) -> None:
        with self._lock:
            self._chosen = None
