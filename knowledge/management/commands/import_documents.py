"""Import Markdown / text files, folders or zips as documents (the admin upload's services).

    python manage.py import_documents knowledge/demo_corpus
    python manage.py import_documents notes/*.md --domain payment --wait

A folder's files are named by their path below it (the doc key), and a file in a subfolder
takes the subfolder's name as its domain unless its frontmatter or --domain names one.

A file whose doc key is an existing document's replaces that document. When that would move the
document into another domain (``notes/pool.md --domain payment`` over an ``infrastructure``
``pool.md``) the import refuses, naming each such file, and stores nothing; ``--move`` moves them.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from knowledge.management.commands._indexing import wait_for_indexing
from knowledge.models import ApiDocument
from knowledge.parsing import DocumentParseError, parse_document, validate_domain
from knowledge.services.documents import ADDED, FAILED, UNCHANGED, UPDATED
from knowledge.services.uploads import UploadItem, UploadRejected, folder_items, items_ingest


def domain_moves(items: list[UploadItem], *, domain: str | None) -> list[tuple[str, str, str]]:
    """(doc key, its domain now, the domain this import gives it) for each file that would move
    an existing document into another domain. Files that do not parse are left to the import,
    which reports them."""
    existing = dict(
        ApiDocument.objects.filter(doc_key__in=[i.name for i in items]).values_list("doc_key", "domain")
    )
    moves = []
    for item in items:
        if item.skip_reason or item.name not in existing:
            continue
        try:
            target = parse_document(item.data, name=item.name, domain=domain or item.folder_domain).domain
        except DocumentParseError:
            continue
        if target != existing[item.name]:
            moves.append((item.name, existing[item.name], target))
    return moves


class Command(BaseCommand):
    help = "Import .md/.markdown/.txt files, folders and zips as documents, then queue their indexing."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or .zip files")
        parser.add_argument("--domain", help="domain for files whose frontmatter names none")
        parser.add_argument("--wait", action="store_true", help="return only when indexing has finished")
        parser.add_argument(
            "--timeout", type=float, default=1800, help="seconds --wait waits at most (default 1800)"
        )
        parser.add_argument(
            "--move",
            action="store_true",
            help="let a file move the existing document of its doc key into another domain "
            "(without it the import refuses and stores nothing)",
        )

    def handle(self, *args, paths, domain=None, wait=False, timeout=1800, move=False, **options):
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
        moves = [] if move else domain_moves(items, domain=domain)
        if moves:
            for key, now, then in moves:
                self.stderr.write(f"  {key}: in domain '{now}'; this import would move it to '{then}'")
            raise CommandError(
                f"{len(moves)} files would move an existing document into another domain; nothing was "
                "imported. Rename them, import them with that document's --domain, or pass --move to move them"
            )

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
