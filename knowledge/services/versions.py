"""A document's versions: the original file kept, and the text of a new upload prepared in the
worker and swapped in together with its chunks.

``document_ingest`` stores the bytes of every upload (``document_original_store``: staff can
download them) and, for a document that already has a version, leaves its title, text and
metadata as they are: lookups keep answering at the previous version while the new one is
indexed. The indexing run then calls ``document_version_prepare`` under the document's lock:

- Markdown / text: the stored bytes are parsed again (cheap, in-process);
- PDF, DOCX, PPTX, XLSX, CSV, HTML: converted to Markdown in a sandboxed child process
  (``knowledge.converters.sandbox``: memory ceiling, time limit), one child for the files of an
  indexing run;

and the indexing writes the prepared title, text and metadata in the same transaction that
swaps the chunks (``document_version_apply``). A file the converter refuses leaves the document
FAILED with the reason, with no chunk or vector of that version; an earlier indexed version
stays searchable.

Which bytes the current text comes from is recorded in ``metadata["text_sha256"]``; a document
whose text already comes from its stored original (or that has none: written before originals
were kept) needs no preparation.
"""

from __future__ import annotations

import logging
from pathlib import PurePosixPath

from django.conf import settings
from django.utils import timezone

from knowledge.converters import CONVERTED_FORMATS, ConversionError
from knowledge.converters.sandbox import ConversionSandbox
from knowledge.models import ApiDocument, DocumentOriginal
from knowledge.parsing import (
    OWNED_METADATA_KEYS,
    DocumentParseError,
    ParsedDocument,
    conversion_limits,
    original_sha256,
    parse_document,
    parsed_from_conversion,
)

logger = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 2000


def document_original_store(
    *, document: ApiDocument, data: bytes, name: str, created: bool = False
) -> DocumentOriginal:
    """Keep the uploaded bytes of ``document`` (replacing the previous upload's). ``created``: the
    document row was made by this upload's transaction, so it has no original yet (one INSERT
    instead of a look-up, a savepoint and an INSERT)."""
    if created:
        original = document_original_new(document=document, data=data, name=name)
        original.save(force_insert=True)
        return original
    original, _ = DocumentOriginal.objects.update_or_create(
        document=document, defaults=_original_fields(data=data, name=name)
    )
    return original


def document_original_new(*, document: ApiDocument, data: bytes, name: str) -> DocumentOriginal:
    """The original of a document created by this upload, unsaved: a bulk ingest writes many at once."""
    return DocumentOriginal(document=document, **_original_fields(data=data, name=name))


def _original_fields(*, data: bytes, name: str) -> dict:
    return {
        "file_name": PurePosixPath(name.replace("\\", "/")).name[:255],
        "data": data,
        "size": len(data),
        "sha256": original_sha256(data),
        "uploaded_at": timezone.now(),
    }


def version_sandbox() -> ConversionSandbox:
    """A conversion child under the configured limits, reused by one indexing run's files."""
    return ConversionSandbox(
        limits=conversion_limits(),
        timeout=settings.INGEST_CONVERT_TIMEOUT_SECONDS,
        memory_mb=settings.INGEST_CONVERT_MEMORY_MB,
    )


def document_originals_known(*, document_ids: list[int]) -> dict[int, DocumentOriginal]:
    """The stored originals of these documents by document id, without their bytes: what
    ``document_version_prepare`` looks at first, read once for a whole indexing run."""
    heads = DocumentOriginal.objects.filter(document_id__in=document_ids).only(
        "document_id", "sha256", "file_name"
    )
    return {original.document_id: original for original in heads}


def document_version_prepare(
    *,
    document: ApiDocument,
    sandbox: ConversionSandbox | None = None,
    originals: dict[int, DocumentOriginal],
) -> ParsedDocument | None:
    """The new version's title, text and metadata when the document's text is not from its
    stored original yet; None when it is. Raises ConversionError (the reason) when the file
    cannot become text. Writes nothing. ``sandbox``: the run's conversion child (None: a child
    for this file only); ``originals``: ``document_originals_known`` of the run."""
    original = originals.get(document.pk)
    metadata = document.metadata if isinstance(document.metadata, dict) else {}
    if original is None or metadata.get("text_sha256") == original.sha256:
        return None
    data = bytes(DocumentOriginal.objects.filter(pk=original.pk).values_list("data", flat=True).get())
    fmt = CONVERTED_FORMATS.get(PurePosixPath(document.doc_key.lower()).suffix)
    if fmt is None:
        try:
            return parse_document(data, name=document.doc_key, domain=document.domain)
        except DocumentParseError as exc:
            raise ConversionError(str(exc)) from exc
    if sandbox is not None:
        converted = sandbox.convert(data, fmt=fmt)
    else:
        with version_sandbox() as own:
            converted = own.convert(data, fmt=fmt)
    return parsed_from_conversion(
        doc_key=document.doc_key,
        domain=document.domain,
        fmt=fmt,
        markdown=converted.markdown,
        title=converted.title,
        keywords=converted.keywords,
        description=converted.description,
        page_count=converted.page_count,
        text_sha256=original.sha256,
    )


def document_version_refused(*, document: ApiDocument, version: str, reason: str) -> None:
    """The new version cannot be indexed: FAILED with the reason (an indexed version stays)."""
    logger.info("document %s (%s) refused: %s", document.pk, document.doc_key, reason)
    ApiDocument.objects.filter(pk=document.pk, content_hash=version).update(
        status=ApiDocument.Status.FAILED, error=reason[:_MAX_ERROR_CHARS], updated_at=timezone.now()
    )


def document_version_apply(*, current: ApiDocument, prepared: ParsedDocument | None) -> list[str]:
    """Put the prepared version on ``current`` (the row locked by the swap); returns the fields to
    save. Metadata other services wrote since (summaries, staff edits) is kept."""
    if prepared is None:
        return []
    current.title = prepared.title
    current.content = prepared.body
    current.metadata = metadata_merged(current.metadata, prepared)
    return ["title", "content", "metadata"]


def metadata_merged(old: dict, parsed: ParsedDocument) -> dict:
    """The new version's metadata, keeping keys other services wrote (generated covers, staff
    edits). Keys the previous upload set from its frontmatter go: a file that drops ``covers``
    drops them."""
    old = dict(old or {})
    previous_front = set(old.get("frontmatter_keys") or [])
    for key in OWNED_METADATA_KEYS:
        old.pop(key, None)
    for key in ("covers", "when_to_retrieve"):
        if key in previous_front:
            old.pop(key, None)
            old.pop(f"{key}_source", None)
    return {**old, **parsed.metadata}
