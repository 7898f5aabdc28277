"""Periodic task: roll up the days that ended, so no dashboard view pays for building them.

Scheduled hourly by CELERY_BEAT_SCHEDULE (config/settings/observability.py; ``make run``'s worker
runs beat). Idempotent: days already rolled up are skipped. A missed run is caught up by the next
one (it looks back ``ROLLUP_LOOKBACK_DAYS``) or by the first dashboard that needs the day.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from observability.rollups import GRACE, rollups_ensure

logger = logging.getLogger(__name__)

ROLLUP_LOOKBACK_DAYS = 3


@shared_task(name="observability.invocation_rollups_build")
def invocation_rollups_build() -> int:
    last = timezone.localtime(timezone.now() - GRACE).date()
    built = rollups_ensure([last - timedelta(days=i) for i in range(ROLLUP_LOOKBACK_DAYS, 0, -1)])
    if built:
        logger.info("rolled up %d day(s) of tool invocations", built)
    return built
