"""Build the daily rollups the dashboards read (observability.rollups) ahead of time.

Dashboards build a missing day on first use; run this after importing or deleting invocations of
past days (``--rebuild``), or to backfill before the first look at a long range.
"""

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from observability.rollups import GRACE, invocation_rollup_build, rollups_ensure


class Command(BaseCommand):
    help = "Roll up tool_invocation per day for the dashboards (missing days, or all with --rebuild)."

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=30, help="how many ended days back (default 30)")
        parser.add_argument("--rebuild", action="store_true", help="rebuild days that are already rolled up")

    def handle(self, *args, days: int, rebuild: bool, **options):
        if days < 1:
            raise CommandError("--days: must be at least 1")
        # Days that ended (plus the grace period) before now, newest last.
        last = timezone.localtime(timezone.now() - GRACE).date()
        wanted = [last - timedelta(days=i) for i in range(days, 0, -1)]
        if rebuild:
            for day in wanted:
                invocation_rollup_build(day=day)
            built = len(wanted)
        else:
            from observability.models import InvocationRollupDay

            before = InvocationRollupDay.objects.filter(day__in=wanted).count()
            rollups_ensure(wanted)
            built = InvocationRollupDay.objects.filter(day__in=wanted).count() - before
        self.stdout.write(f"rolled up {built} day(s) of {len(wanted)} ({wanted[0]} .. {wanted[-1]})")
