"""Write every document back to files, frontmatter included: a backup that import_documents reads.

    python manage.py export_documents backup/            # backup/<doc key>
    python manage.py export_documents backup/ --domain payment

Re-importing the export leaves every document unchanged (the content hash covers what is written).
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from knowledge.services.export import documents_export


class Command(BaseCommand):
    help = "Write documents (with their frontmatter) to DIR, one file per doc key."

    def add_arguments(self, parser):
        parser.add_argument("directory", metavar="DIR")
        parser.add_argument("--domain", help="only this domain's documents")

    def handle(self, *args, directory, domain=None, **options):
        try:
            written = documents_export(directory=Path(directory), domain=domain)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"wrote {len(written)} documents to {directory}")
