"""agentkb's own: chunks stored in the database so results show text without asking Milvus."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0002_v009_knowledge_domain"),
    ]

    operations = [
        migrations.CreateModel(
            name="DocumentChunk",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("chunk_index", models.IntegerField()),
                ("heading_path", models.CharField(blank=True, default="", max_length=1024)),
                ("content", models.TextField()),
                (
                    "document",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="chunks",
                        to="knowledge.apidocument",
                    ),
                ),
            ],
            options={
                "db_table": "document_chunk",
                "ordering": ["document_id", "chunk_index"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("document", "chunk_index"), name="uniq_chunk_per_document"
                    )
                ],
            },
        ),
    ]
