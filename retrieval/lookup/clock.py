"""Timing the lookup's stages from outside: ``StageClock.run`` calls a stage and adds its
duration under the stage's name, so no stage carries timing code of its own."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class StageClock:
    """Milliseconds spent per stage name; a name run twice adds up (the memory is read before
    the search and marked after it)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    def run(self, name: str, stage: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        started = time.perf_counter()
        try:
            return stage(*args, **kwargs)
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - started) * 1000

    def get(self, *names: str) -> float:
        """The summed milliseconds of ``names``, to 0.01 ms (0 for a stage that did not run)."""
        return round(sum(self.ms.get(name, 0.0) for name in names), 2)
