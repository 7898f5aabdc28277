"""V010 (seed 000 section 6): the normalised relevance level and the dedup reason of each call.

Exactly the two nullable columns of the original ALTER TABLE; history rows keep NULL.
The indexes the dashboards need come in the next migration so this one stays V010 as written.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("observability", "0001_initial"),
        # V010 came after V009 in the original service.
        ("knowledge", "0002_v009_knowledge_domain"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolinvocation",
            name="relevance_level",
            field=models.CharField(blank=True, max_length=20, null=True),
        ),
        migrations.AddField(
            model_name="toolinvocation",
            name="dedup_reason",
            field=models.CharField(blank=True, max_length=32, null=True),
        ),
    ]
