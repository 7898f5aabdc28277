"""Import Markdown / text files, folders or zips as documents (the admin upload's services).

    python manage.py import_documents knowledge/demo_corpus
    python manage.py import_documents notes/*.md --domain payment --wait

A folder's files are named by their path below it (the doc key), and a file in a subfolder
takes the subfolder's name as its domain unless its frontmatter or --domain names one.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from knowledge.management.commands._indexing import wait_for_indexing
from knowledge.parsing import DocumentParseError, validate_domain
from knowledge.services.documents import ADDED, FAILED, UNCHANGED, UPDATED
from knowledge.services.uploads import UploadRejected, folder_items, items_ingest


class Command(BaseCommand):
    help = "Import .md/.markdown/.txt files, folders and zips as documents, then queue their indexing."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or .zip files")
        parser.add_argument("--domain", help="domain for files whose frontmatter names none")
        parser.add_argument("--wait", action="store_true", help="return only when indexing has finished")
        parser.add_argument(
            "--timeout", type=float, default=1800, help="seconds --wait waits at most (default 1800)"
        )

    def handle(self, *args, paths, domain=None, wait=False, timeout=1800, **options):
        if domain:
            try:
                domain = validate_domain(domain, field_name="--domain")
            except DocumentParseError as exc:
                raise CommandError(str(exc)) from exc
        try:
            items = folder_items([Path(p) for p in paths])
        except UploadRejected as exc:
            raise CommandError(str(exc)) from exc
        if not items:
            raise CommandError("no .md, .markdown or .txt files found")

        with tqdm(total=len(items), desc="importing", unit="file", file=self.stderr._out) as bar:
            results = items_ingest(items=items, domain=domain, progress=lambda _r: bar.update(1))

        counts = {outcome: 0 for outcome in (ADDED, UPDATED, UNCHANGED, FAILED)}
        for result in results:
            counts[result.outcome] += 1
        self.stdout.write(
            f"{len(results)} files: {counts[ADDED]} added, {counts[UPDATED]} updated, "
            f"{counts[UNCHANGED]} unchanged, {counts[FAILED]} failed"
        )
        for result in results:
            if result.outcome == FAILED:
                self.stdout.write(f"  failed  {result.name}: {result.error}")
            elif result.requeued:
                self.stdout.write(f"  retry   {result.name}: unchanged, but its last indexing had failed")

        queued = [
            r.document.id
            for r in results
            if r.document is not None and (r.outcome in (ADDED, UPDATED) or r.requeued)
        ]
        if wait and queued:
            self.stdout.write(f"waiting for the worker to index {len(queued)} documents...")
            statuses = wait_for_indexing(queued, timeout=timeout)
            self.stdout.write(
                f"indexed {statuses.get('INDEXED', 0)}, failed {statuses.get('FAILED', 0)}, "
                f"still waiting {statuses.get('PENDING', 0) + statuses.get('INDEXING', 0)}"
            )
            from knowledge.models import ApiDocument

            for doc in ApiDocument.objects.filter(id__in=queued, status=ApiDocument.Status.FAILED):
                self.stdout.write(f"  failed  {doc.doc_key}: {doc.error}")
            if statuses.get("PENDING", 0) + statuses.get("INDEXING", 0):
                raise CommandError(f"indexing did not finish within {timeout:.0f} s; is the worker running?")
            if statuses.get("FAILED", 0):
                raise CommandError(f"{statuses['FAILED']} documents failed to index")
        if counts[FAILED]:
            raise CommandError(f"{counts[FAILED]} files could not be imported")
