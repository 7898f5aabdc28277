"""The original service's tool_invocation table as it stood before V010."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="ToolInvocation",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("session_id", models.CharField(db_index=True, max_length=128)),
                ("tool_name", models.CharField(max_length=64)),
                ("request", models.JSONField(blank=True, default=dict)),
                ("result_summary", models.TextField(blank=True, default="")),
                (
                    "status",
                    models.CharField(
                        choices=[("SUCCESS", "Success"), ("DEGRADED", "Degraded"), ("ERROR", "Error")],
                        default="SUCCESS",
                        max_length=16,
                    ),
                ),
                ("error", models.TextField(blank=True, default="")),
                ("duration_ms", models.IntegerField(default=0)),
                ("retrieval_details", models.JSONField(blank=True, null=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "db_table": "tool_invocation",
                "ordering": ["-created_at"],
                "indexes": [
                    models.Index(fields=["tool_name", "created_at"], name="tool_inv_tool_created_idx")
                ],
            },
        ),
    ]
