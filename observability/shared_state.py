"""Figures about the state every agent shares, read for the dashboard: how many sessions the
action memory dropped because their agent held more than its cap (issue 27).

The action memory is the retrieval app's; it registers its counter here at start-up
(``RetrievalConfig.ready``), so observability never imports retrieval (the dependency runs
retrieval -> observability only, as for the thresholds in calibration.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

_sessions_evicted_reader: Callable[[], int] | None = None


def sessions_evicted_reader_register(reader: Callable[[], int]) -> None:
    global _sessions_evicted_reader
    _sessions_evicted_reader = reader


def sessions_evicted() -> int | None:
    """Sessions evicted so far, or None when nothing can say (no reader registered, or the store
    does not answer): the dashboard shows a dash then rather than failing the whole page."""
    if _sessions_evicted_reader is None:
        return None
    try:
        return _sessions_evicted_reader()
    except Exception:  # the store is down (TrackerUnavailable...): one card blank, not a 500
        logger.warning("sessions evicted: the action memory did not answer", exc_info=True)
        return None
