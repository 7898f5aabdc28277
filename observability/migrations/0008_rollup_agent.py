"""Daily rollups gain the agent dimension (the dashboard filters and breaks down by agent), and
the covering dashboard index gains ``agent`` so the agent filter is answered from it too. The
rollups also get an index on ``day``: a day's rebuild deletes its rows first, which scanned the
whole table.

Rollups built before this have no agent and count sessions across agents as one: they are all
dropped, with their day markers, and rebuilt by the worker's hourly run, by the first dashboard
that needs a day (read raw meanwhile), or at once by ``manage.py rollup_invocations``. Dropping
is idempotent, so a migration re-run after a failure (MariaDB does not roll DDL back) is safe;
going backwards drops them again for the same reason.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def rollups_drop(apps, schema_editor):
    db = schema_editor.connection.alias
    apps.get_model("observability", "InvocationDailyRollup").objects.using(db).all().delete()
    apps.get_model("observability", "InvocationRollupDay").objects.using(db).all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("observability", "0007_invocation_agent_public_id"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(rollups_drop, rollups_drop),
        migrations.RemoveIndex(
            model_name="toolinvocation",
            name="tool_inv_dashboard_idx",
        ),
        migrations.AddField(
            model_name="invocationdailyrollup",
            name="agent",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="agent",
            ),
        ),
        migrations.AddIndex(
            model_name="invocationdailyrollup",
            index=models.Index(fields=["agent", "day"], name="tool_inv_daily_agent_idx"),
        ),
        migrations.AddIndex(
            model_name="invocationdailyrollup",
            index=models.Index(fields=["day"], name="tool_inv_daily_day_idx"),
        ),
        migrations.AddIndex(
            model_name="toolinvocation",
            index=models.Index(
                fields=[
                    "tool_name",
                    "created_at",
                    "relevance_level",
                    "dedup_reason",
                    "status",
                    "duration_ms",
                    "l1_top_similarity",
                    "primary_domain",
                    "session_id",
                    "agent",
                ],
                name="tool_inv_dashboard_idx",
            ),
        ),
    ]
