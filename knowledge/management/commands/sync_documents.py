"""Make the knowledge base mirror a folder.

    python manage.py sync_documents ~/handbook/ --domain handbook
    python manage.py sync_documents export/ --prune --dry-run

Unchanged files are skipped by their content hash, changed ones re-indexed, new ones added;
documents an earlier sync of this folder wrote whose file is gone are deleted only with --prune.
--dry-run says what would happen and writes nothing. Re-running a sync changes nothing.
Exits 1 when a file could not be stored or (with --wait) indexed, as import_documents does, so a
script or cron job sees it.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from knowledge.management.commands._indexing import wait_for_indexing
from knowledge.parsing import DocumentParseError, validate_domain
from knowledge.services.documents import ADDED, FAILED, UNCHANGED, UPDATED
from knowledge.services.sync import DELETED, folder_sync
from knowledge.services.uploads import UploadRejected


class Command(BaseCommand):
    help = "Mirror a folder: add new files, re-index changed ones, skip unchanged ones (--prune deletes gone ones)."

    def add_arguments(self, parser):
        parser.add_argument("directory", metavar="DIR", help="the folder to mirror")
        parser.add_argument("--domain", help="domain for files whose frontmatter names none")
        parser.add_argument("--prune", action="store_true", help="delete documents whose file is gone")
        parser.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
        parser.add_argument("--wait", action="store_true", help="return only when indexing has finished")
        parser.add_argument("--timeout", type=float, default=1800, help="seconds --wait waits at most")

    def handle(
        self, *args, directory, domain=None, prune=False, dry_run=False, wait=False, timeout=1800, **options
    ):
        folder = Path(directory)
        if not folder.is_dir():
            raise CommandError(f"DIR: '{directory}' is not a folder")
        if domain:
            try:
                domain = validate_domain(domain, field_name="--domain")
            except DocumentParseError as exc:
                raise CommandError(str(exc)) from exc
        bar = tqdm(desc="syncing", unit="file", file=self.stderr._out)
        try:
            report = folder_sync(
                directory=folder,
                domain=domain,
                prune=prune,
                dry_run=dry_run,
                progress=lambda _n, _o: bar.update(1),
            )
        except UploadRejected as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bar.close()

        self.stdout.write(report.summary())
        for name in report.outcomes[FAILED]:
            self.stdout.write(f"  failed   {name}: {report.errors.get(name, '')}")
        for name in report.outcomes[DELETED]:
            self.stdout.write(f"  {'would delete' if dry_run else 'deleted'}  {name}")
        if wait and report.queued_ids:
            statuses = wait_for_indexing(report.queued_ids, timeout=timeout)
            self.stdout.write(f"indexed {statuses.get('INDEXED', 0)}, failed {statuses.get('FAILED', 0)}")
            if statuses.get("FAILED", 0):
                raise CommandError(f"{statuses['FAILED']} documents failed to index")
        failed = len(report.outcomes[FAILED])
        if failed:
            files = sum(report.count(o) for o in (ADDED, UPDATED, UNCHANGED, FAILED))
            every = " (every file)" if failed == files else ""
            raise CommandError(f"{failed} files could not be synced{every}")
