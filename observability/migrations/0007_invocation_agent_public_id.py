"""Per-agent records: the agent (the tool token's user) of every call, and the random id agents
see instead of the sequential primary key. Existing rows keep NULL in both (no agent was
recorded as a key; their ids were never handed out in the new form)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import observability.models


class Migration(migrations.Migration):
    dependencies = [
        ("observability", "0006_verbose_names"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # One name for the calibration page: the sidebar shows the plural.
        migrations.AlterModelOptions(
            name="thresholdcalibration",
            options={
                "ordering": ["-applied_at", "-id"],
                "verbose_name": "threshold calibration",
                "verbose_name_plural": "threshold calibration",
            },
        ),
        migrations.AddField(
            model_name="toolinvocation",
            name="agent",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="agent",
            ),
        ),
        # Added without a default first: a callable default would be evaluated once and written
        # to every existing row, breaking the unique index. NULLs do not collide.
        migrations.AddField(
            model_name="toolinvocation",
            name="public_id",
            field=models.CharField(blank=True, editable=False, max_length=32, null=True),
        ),
        migrations.AlterField(
            model_name="toolinvocation",
            name="public_id",
            field=models.CharField(
                blank=True,
                default=observability.models.invocation_public_id_new,
                editable=False,
                max_length=32,
                null=True,
                unique=True,
            ),
        ),
    ]
