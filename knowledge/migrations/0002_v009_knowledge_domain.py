"""V009 (seed 004): the knowledge_domain table holding each domain's planner guidance."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="KnowledgeDomain",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("domain_id", models.CharField(max_length=64, unique=True)),
                ("description", models.CharField(blank=True, max_length=256, null=True)),
                ("when_to_retrieve", models.TextField(blank=True, null=True)),
                ("document_count", models.IntegerField(default=0)),
                ("updated_at", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "db_table": "knowledge_domain",
                "ordering": ["domain_id"],
            },
        ),
    ]
