"""Indexes the dashboards group and filter by."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("observability", "0002_v010_relevance_level_dedup_reason"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="toolinvocation",
            index=models.Index(fields=["relevance_level"], name="tool_inv_relevance_idx"),
        ),
        migrations.AddIndex(
            model_name="toolinvocation",
            index=models.Index(fields=["dedup_reason"], name="tool_inv_dedup_idx"),
        ),
    ]
