"""Regenerate knowledge domains' when_to_retrieve / description from their documents.

python manage.py regenerate_domains                 # queue every domain with documents
python manage.py regenerate_domains --domain payment --sync
python manage.py regenerate_domains --missing       # only domains without guidance (start-up check)
"""

from django.core.management.base import BaseCommand, CommandError

from knowledge.llm import LLMUnavailable, llm_source_name
from knowledge.models import KnowledgeDomain
from knowledge.selectors import domain_ids_known, domain_ids_with_documents
from knowledge.services.domains import (
    Outcome,
    domain_summary_failure_record,
    domain_summary_regenerate,
    domain_summary_regenerate_now,
    domains_missing_summary,
)


class Command(BaseCommand):
    help = "Regenerate knowledge domains' planner guidance (queued to the worker, or --sync here)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--domain", action="append", dest="domains", metavar="D", help="only this domain (repeatable)"
        )
        parser.add_argument(
            "--sync", action="store_true", help="run here and wait, instead of queueing to the worker"
        )
        parser.add_argument(
            "--missing", action="store_true", help="only domains with documents but no when_to_retrieve"
        )

    def handle(self, *args, domains=None, sync=False, missing=False, **options):
        known = set(domain_ids_known())
        if domains:
            unknown = sorted(set(domains) - known)
            if unknown:
                raise CommandError(f"--domain: unknown domain(s): {', '.join(unknown)}")
            targets = sorted(set(domains))
        elif missing:
            targets = domains_missing_summary()
        else:
            targets = domain_ids_with_documents()
        if not targets:
            self.stdout.write("nothing to regenerate")
            return

        if not sync:
            for domain_id in targets:
                domain_summary_regenerate_now(domain_id=domain_id)
            self.stdout.write(f"queued {len(targets)} domain(s): {', '.join(targets)}")
            return

        self.stdout.write(f"regenerating {len(targets)} domain(s) with the {llm_source_name()} summariser")
        failed = []
        for domain_id in targets:
            try:
                outcome = domain_summary_regenerate(domain_id=domain_id)
            except LLMUnavailable as exc:
                domain_summary_failure_record(domain_id=domain_id, error=str(exc), final=True)
                outcome = Outcome.FAILED
            domain = KnowledgeDomain.objects.get(domain_id=domain_id)
            line = f"{domain_id}: {outcome.value} [{domain.summary_source or '-'}] {domain.when_to_retrieve or ''}"
            if domain.last_error:
                line += f"\n    {domain.last_error}"
            self.stdout.write(line)
            if outcome in (Outcome.FAILED, Outcome.BUSY):
                failed.append(domain_id)
        if failed:
            raise CommandError(f"not regenerated: {', '.join(failed)}")
