"""Queue indexing of documents left PENDING (the broker was down at upload, a message was lost).

    python manage.py requeue_pending                    # PENDING for INGEST_REQUEUE_AFTER_SECONDS
    python manage.py requeue_pending --older-than 0     # every PENDING document, now

Celery beat runs the same sweep every five minutes; this is for an operator who has just brought
the broker back. Exits 1 when the broker still refuses (the documents stay PENDING).
"""

from django.core.management.base import BaseCommand, CommandError

from knowledge.services.maintenance import documents_pending_requeue


class Command(BaseCommand):
    help = "Queue indexing of documents left PENDING or stuck INDEXING."

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            help="seconds a document must have been PENDING (default INGEST_REQUEUE_AFTER_SECONDS)",
        )

    def handle(self, *args, older_than=None, **options):
        if older_than is not None and older_than < 0:
            raise CommandError("--older-than: must be 0 or more seconds")
        result = documents_pending_requeue(older_than_seconds=older_than)
        self.stdout.write(f"queued {len(result.queued)} documents for indexing")
        for doc_key in result.queued:
            self.stdout.write(f"  {doc_key}")
        if result.failed:
            raise CommandError(
                f"the broker refused {len(result.failed)} documents (they stay PENDING): {result.error}"
            )
