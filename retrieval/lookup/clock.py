"""Timing the lookup's stages from outside: ``StageClock.run`` calls a stage and adds its
duration under the stage's name, so no stage carries timing code of its own.

The one timing helper is also where a stage is measured for operators: each run is observed in
the ``agentkb_lookup_stage_seconds`` histogram and, when an OTLP endpoint is set, traced as a
span of that name under the lookup's span (``StageClock.lookup``; ``observability.tracing``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ParamSpec, TypeVar

from observability.prometheus import stage_observe
from observability.tracing import span

P = ParamSpec("P")
T = TypeVar("T")

#: the span every stage's span sits under
LOOKUP_SPAN = "lookup"


class StageClock:
    """Milliseconds spent per stage name; a name run twice adds up (the memory is read before
    the search and marked after it)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    def lookup(self) -> AbstractContextManager[Any]:
        """The span of the whole lookup (a no-op without tracing): the stages run inside it."""
        return span(LOOKUP_SPAN)

    def run(self, name: str, stage: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        with span(name):
            started = time.perf_counter()
            try:
                return stage(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - started
                self.ms[name] = self.ms.get(name, 0.0) + seconds * 1000
                stage_observe(name, seconds)

    def get(self, *names: str) -> float:
        """The summed milliseconds of ``names``, to 0.01 ms (0 for a stage that did not run)."""
        return round(sum(self.ms.get(name, 0.0) for name in names), 2)
