"""Knowledge domains: the knowledge_domain rows that aggregate a domain's documents (seed 004)."""

from __future__ import annotations

from django.db import transaction

from knowledge.models import ApiDocument, KnowledgeDomain


@transaction.atomic
def domain_document_count_refresh(*, domain_id: str) -> KnowledgeDomain:
    """Create the domain row if needed and set document_count from api_document."""
    domain, _ = KnowledgeDomain.objects.select_for_update().get_or_create(domain_id=domain_id)
    domain.document_count = ApiDocument.objects.filter(domain=domain_id).count()
    domain.save()
    return domain


def domain_documents_changed(*, domain_id: str) -> None:
    """Call after any change to a domain's documents (upload, re-upload, delete, metadata edit).

    Keeps document_count right. (The domain-map issue extends this to queue a debounced
    regeneration of the domain's when_to_retrieve.)
    """
    domain_document_count_refresh(domain_id=domain_id)


def document_indexed(*, document_id: int) -> None:
    """Call (on commit) once a document reached INDEXED.

    Hook for the domain-map issue: it generates the document's covers / when_to_retrieve when
    its frontmatter lacks them, then regenerates the domain's summary. Nothing to do before that.
    """
