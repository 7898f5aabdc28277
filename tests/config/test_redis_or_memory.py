"""The one choice of where state every web process shares lives: Redis when the default cache is
django-redis, else this process's memory; made on first use, kept, and made again after a reset."""

from __future__ import annotations

from config.redis_or_memory import RedisOrMemory, several_processes_problem
from retrieval.agents.budget_windows import MemoryWindow, RedisWindow, budget_window
from retrieval.agents.throttling import budget_window_reset
from retrieval.entrypoints.mcp_sessions import (
    MemorySessions,
    RedisSessions,
    session_registry,
    session_registry_reset,
)

REDIS_CACHE = {
    "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://127.0.0.1:6379/5"}
}
MEMORY_CACHE = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def test_the_choice_follows_the_cache_in_force_at_first_use_and_is_kept_until_reset(settings):
    built = []
    state = RedisOrMemory(redis=lambda: built.append("redis") or "redis", memory=lambda: "memory")
    settings.CACHES = MEMORY_CACHE
    assert state.get() == "memory"
    settings.CACHES = REDIS_CACHE
    assert state.get() == "memory"  # kept: one object per process
    state.reset()
    assert state.get() == state.get() == "redis"
    assert built == ["redis"]  # built once


def test_budgets_and_mcp_sessions_take_the_same_side(settings):
    try:
        settings.CACHES = REDIS_CACHE
        budget_window_reset()
        session_registry_reset()
        assert isinstance(budget_window(), RedisWindow) and isinstance(session_registry(), RedisSessions)
        settings.CACHES = MEMORY_CACHE
        budget_window_reset()
        session_registry_reset()
        assert isinstance(budget_window(), MemoryWindow) and isinstance(session_registry(), MemorySessions)
    finally:
        budget_window_reset()
        session_registry_reset()


def test_several_web_workers_without_redis_are_warned_about(settings):
    settings.CACHES = MEMORY_CACHE
    problem = several_processes_problem(4)
    assert problem is not None and "REDIS_URL" in problem and "4 web workers" in problem
    assert several_processes_problem(1) is None
    settings.CACHES = REDIS_CACHE
    assert several_processes_problem(4) is None
