"""Compare the documents and chunks in the database with the vectors in Milvus.

    python manage.py check_index            # report; exit 1 when something differs
    python manage.py check_index --repair   # delete orphaned/stale vectors, re-index the rest
    python manage.py check_index --json     # the report as JSON (for monitoring)

Found: ``missing`` (chunk rows of INDEXED documents without a vector), ``orphaned`` (vectors of
deleted documents), ``stale`` (vectors of existing documents with no chunk row), ``wrong_domain``
(vectors whose domain is not their document's). Documents being indexed are skipped. Celery beat
runs ``--repair`` nightly (INDEX_CHECK_HOUR). Talks to the Milvus in MILVUS_URI.

The lexical index, when it is kept apart from the vectors (tantivy, ``LEXICAL_ENGINE``), is
compared the same way, chunk ids per document; ``--repair`` rewrites the drifted documents'
entries from their chunk rows. An index built by another analyser is reported as needing a
rebuild (``reindex --lexical-only``, which ``--repair`` runs).
"""

import json

from django.core.management.base import BaseCommand, CommandError

from knowledge.services.maintenance import index_check
from knowledge.vectorstore import VectorStoreError

_SHOWN = 10


class Command(BaseCommand):
    help = (
        "Compare api_document/document_chunk with Milvus and the lexical index; --repair fixes what differs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--repair", action="store_true", help="fix what differs")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the report as JSON")

    def handle(self, *args, repair=False, as_json=False, **options):
        try:
            report = index_check(repair=repair)
        except VectorStoreError as exc:
            raise CommandError(f"the vector store did not answer: {exc}") from exc
        if as_json:
            self.stdout.write(_dumps(report.as_dict()))
        else:
            self._print(report, repair=repair)
        if report.schema:
            raise CommandError("the collection's schema does not match the Milvus server; migrate it first")
        if not report.ok and not repair:
            raise CommandError("the index differs from the database; run with --repair to fix it")

    def _print_drift(self, report, prefix: str, **kinds: str) -> None:
        """One line per kind of drift found (its count and the first ids)."""
        for name, what in kinds.items():
            ids = getattr(report, name)
            if ids:
                more = f" (+{len(ids) - _SHOWN} more)" if len(ids) > _SHOWN else ""
                self.stdout.write(f"{prefix}{name}: {len(ids)} {what}: {', '.join(ids[:_SHOWN])}{more}")

    def _print(self, report, *, repair: bool) -> None:
        if report.schema:
            self.stdout.write(f"schema: {report.schema}")
            return
        self.stdout.write(
            f"{report.documents} documents, {report.chunks} chunks, {report.vectors} vectors"
            + (f"; {len(report.in_flight)} being indexed (skipped)" if report.in_flight else "")
        )
        self._print_drift(
            report,
            "",
            missing="chunks without a vector",
            orphaned="vectors of deleted documents",
            stale="vectors without a chunk row",
            wrong_domain="vectors in the wrong domain",
        )
        self._print_lexical(report.lexical)
        if report.ok:
            self.stdout.write(self.style.SUCCESS("index consistent"))
        elif repair:
            self.stdout.write(
                f"repaired: deleted {report.repaired_vectors_deleted} vectors, queued re-indexing of "
                f"{len(report.repaired_documents_requeued)} documents"
            )

    def _print_lexical(self, lexical) -> None:
        if lexical is None:
            return
        if not lexical.checked:
            self.stdout.write(f"lexical index: {lexical.engine}, in the vector rows (checked with them)")
            return
        self.stdout.write(f"lexical index: {lexical.engine}, {lexical.entries} entries")
        if lexical.rebuild_needed:
            self.stdout.write(
                f"lexical: needs a rebuild (`reindex --lexical-only`): {lexical.rebuild_needed}"
            )
        self._print_drift(
            lexical,
            "lexical ",
            missing="chunks without a lexical entry",
            orphaned="entries of deleted documents",
            stale="entries without a chunk row",
            wrong_domain="entries in the wrong domain",
        )
        if lexical.rebuilt:
            self.stdout.write("lexical: rebuilt from the stored chunk text")
        elif lexical.repaired_documents:
            self.stdout.write(
                f"lexical: rewrote the entries of {len(lexical.repaired_documents)} documents from their rows"
            )


def _dumps(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)
