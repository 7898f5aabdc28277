"""Re-index documents: after a chunking change, a repaired Milvus, or a new embedding model.

    python manage.py reindex                      # queue every document
    python manage.py reindex --domain payment     # one domain
    python manage.py reindex --recreate --wait    # new model: drop and rebuild the collection
    python manage.py reindex --lexical-only       # rebuild the lexical index from the stored text

``--recreate`` is the fix the start-up check names when the collection was built with another
embedding model or dimension. Run it against the Milvus the worker uses (with ``make run`` up:
``MILVUS_URI=http://127.0.0.1:19530``).

``--lexical-only`` rebuilds the tantivy index (``LEXICAL_ENGINE``) here, in this process, from the
chunk text in the database: nothing is embedded, no vector changes, lookups keep searching the
old index until the new one is committed whole. It is the fix ``check_index`` names after an
analyser change. ``--from-scratch`` starts from an empty folder (a damaged index).
"""

from django.core.management.base import BaseCommand, CommandError

from knowledge.management.commands._indexing import wait_for_indexing
from knowledge.models import ApiDocument
from knowledge.services.lexical import LexicalNotSeparate, lexical_index_rebuild
from knowledge.services.reindex import documents_reindex
from knowledge.services.vectors import vector_collection_recreate
from knowledge.vectorstore import VectorStoreError


class Command(BaseCommand):
    help = "Queue re-indexing of documents; --recreate rebuilds the Milvus collection for the current model."

    def add_arguments(self, parser):
        parser.add_argument("--domain", help="only this domain's documents")
        parser.add_argument(
            "--recreate",
            action="store_true",
            help="drop the vector collection and create it for the configured embedding model first",
        )
        parser.add_argument(
            "--lexical-only",
            action="store_true",
            help="rebuild only the lexical index from the stored chunk text (no embedding), now",
        )
        parser.add_argument(
            "--from-scratch",
            action="store_true",
            help="with --lexical-only: start from an empty index folder",
        )
        parser.add_argument("--wait", action="store_true", help="return only when indexing has finished")
        parser.add_argument("--timeout", type=float, default=3600, help="seconds --wait waits at most")

    def handle(self, *args, domain=None, recreate=False, wait=False, timeout=3600, **options):
        if options.get("lexical_only"):
            self._lexical_only(
                domain=domain, recreate=recreate, from_scratch=options.get("from_scratch", False)
            )
            return
        if options.get("from_scratch"):
            raise CommandError("--from-scratch goes with --lexical-only")
        if recreate and domain:
            raise CommandError("--recreate drops every vector; it cannot be limited to one --domain")
        if domain and not ApiDocument.objects.filter(domain=domain).exists():
            raise CommandError(f"--domain: no documents in domain '{domain}'")
        if recreate:
            try:
                model_name, dim = vector_collection_recreate()
            except VectorStoreError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"recreated the vector collection for {dim}-d '{model_name}'")
        ids = list(
            (ApiDocument.objects.filter(domain=domain) if domain else ApiDocument.objects.all()).values_list(
                "id", flat=True
            )
        )
        count = documents_reindex(document_ids=ids)
        self.stdout.write(f"queued {count} documents for indexing")
        if wait and ids:
            statuses = wait_for_indexing(ids, timeout=timeout)
            self.stdout.write(f"indexed {statuses.get('INDEXED', 0)}, failed {statuses.get('FAILED', 0)}")
            if statuses.get("PENDING", 0) + statuses.get("INDEXING", 0):
                raise CommandError(f"indexing did not finish within {timeout:.0f} s; is the worker running?")
            if statuses.get("FAILED", 0):
                raise CommandError(f"{statuses['FAILED']} documents failed to index")

    def _lexical_only(self, *, domain, recreate: bool, from_scratch: bool) -> None:
        if domain or recreate:
            raise CommandError("--lexical-only rebuilds the whole lexical index; no --domain or --recreate")
        try:
            result = lexical_index_rebuild(from_scratch=from_scratch)
        except LexicalNotSeparate as exc:
            raise CommandError(str(exc)) from exc
        except VectorStoreError as exc:
            raise CommandError(f"the lexical index could not be rebuilt: {exc}") from exc
        skipped = f"; {len(result.in_flight)} being indexed left to their runs" if result.in_flight else ""
        self.stdout.write(
            f"rebuilt the lexical index{' from scratch' if result.from_scratch else ''}: "
            f"{result.documents} documents, {result.chunks} chunks in {result.seconds:.1f} s{skipped}"
        )
