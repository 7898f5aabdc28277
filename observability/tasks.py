"""Periodic task: roll up the days that ended, so no dashboard view pays for building them.

Scheduled hourly by CELERY_BEAT_SCHEDULE (config/settings/observability.py; ``make run``'s worker
runs beat). Idempotent: days already rolled up are skipped. A missed run is caught up by the next
one (it looks back ``ROLLUP_LOOKBACK_DAYS``) or by the first dashboard that needs the day.
"""

from __future__ import annotations

import logging
from datetime import date, timedelta

from celery import shared_task
from django.utils import timezone

from observability.rollups import GRACE, rollups_ensure

logger = logging.getLogger(__name__)

ROLLUP_LOOKBACK_DAYS = 3


@shared_task(name="observability.invocation_rollups_build")
def invocation_rollups_build(days: list[str] | None = None) -> int:
    """Roll up ``days`` (ISO dates; queued by a dashboard that needed more than it builds
    itself), or by default the last ended days. Returns how many days are rolled up."""
    if days:
        wanted = [date.fromisoformat(d) for d in days]
    else:
        last = timezone.localtime(timezone.now() - GRACE).date()
        wanted = [last - timedelta(days=i) for i in range(ROLLUP_LOOKBACK_DAYS, 0, -1)]
    ready = rollups_ensure(wanted)
    logger.info("%d of %d day(s) of tool invocations rolled up", len(ready), len(wanted))
    return len(ready)
