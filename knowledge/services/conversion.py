"""The original file of a document, and its conversion to Markdown (PDF, DOCX, PPTX, XLSX, CSV, HTML).

``document_original_store`` keeps what was uploaded (called by ``document_ingest`` for every
format, so staff can download it). ``document_convert`` runs in the indexing task, under the
document's lock, before chunking: when the document's text does not come from its current
original yet, the original is converted in a sandboxed child process
(``knowledge.converters.sandbox``) and the Markdown, title, keywords and page count are written
to the document. A file the converter refuses leaves the document FAILED with the reason and
nothing is chunked or embedded; a previously indexed version stays searchable.
"""

from __future__ import annotations

import logging
from pathlib import PurePosixPath

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from knowledge.converters import CONVERTED_FORMATS, ConversionError
from knowledge.converters.sandbox import convert_isolated
from knowledge.models import ApiDocument, DocumentOriginal
from knowledge.parsing import MAX_TITLE_CHARS, conversion_limits, first_heading, original_sha256

logger = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 2000


def document_original_store(*, document: ApiDocument, data: bytes, name: str) -> DocumentOriginal:
    """Keep the uploaded bytes of ``document`` (replacing the previous upload's)."""
    original, _ = DocumentOriginal.objects.update_or_create(
        document=document,
        defaults={
            "file_name": PurePosixPath(name.replace("\\", "/")).name[:255],
            "data": data,
            "size": len(data),
            "sha256": original_sha256(data),
            "uploaded_at": timezone.now(),
        },
    )
    return original


def document_needs_conversion(document: ApiDocument) -> bool:
    metadata = document.metadata if isinstance(document.metadata, dict) else {}
    if metadata.get("format") not in CONVERTED_FORMATS.values():
        return False
    return metadata.get("converted_sha256") != metadata.get("original_sha256")


def document_convert(*, document: ApiDocument) -> str | None:
    """Convert ``document``'s original when its text is not from it yet; updates ``document`` in
    place. Returns None when the document is ready to chunk, else the reason it failed (the
    document is then FAILED with that reason)."""
    if not document_needs_conversion(document):
        return None
    version = document.content_hash
    original = DocumentOriginal.objects.filter(document_id=document.pk).first()
    if original is None:
        return _failed(document, version, "the original file is missing; upload it again")
    fmt = document.metadata["format"]
    try:
        converted = convert_isolated(
            bytes(original.data),
            fmt=fmt,
            limits=conversion_limits(),
            timeout=settings.INGEST_CONVERT_TIMEOUT_SECONDS,
            memory_mb=settings.INGEST_CONVERT_MEMORY_MB,
        )
    except ConversionError as exc:
        logger.info(
            "document %s (%s) refused by the converter: %s", document.pk, document.doc_key, exc.reason
        )
        return _failed(document, version, exc.reason)

    title = converted.title or first_heading(converted.markdown) or PurePosixPath(document.doc_key).stem
    metadata = dict(document.metadata)
    metadata.update(
        keywords=converted.keywords[:200],
        description=converted.description[:2000],
        converted_sha256=original.sha256,
    )
    if converted.page_count is not None:
        metadata["page_count"] = converted.page_count
    else:
        metadata.pop("page_count", None)
    with transaction.atomic():
        updated = ApiDocument.objects.filter(pk=document.pk, content_hash=version).update(
            content=converted.markdown,
            title=title[:MAX_TITLE_CHARS],
            metadata=metadata,
            updated_at=timezone.now(),
        )
    if not updated:
        return "superseded by a newer upload"
    document.content, document.title, document.metadata = (
        converted.markdown,
        title[:MAX_TITLE_CHARS],
        metadata,
    )
    return None


def _failed(document: ApiDocument, version: str, reason: str) -> str:
    ApiDocument.objects.filter(pk=document.pk, content_hash=version).update(
        status=ApiDocument.Status.FAILED, error=reason[:_MAX_ERROR_CHARS], updated_at=timezone.now()
    )
    return reason
