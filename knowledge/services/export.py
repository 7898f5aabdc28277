"""Documents back to files (``export_documents``)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from knowledge.converters import CONVERTED_FORMATS
from knowledge.models import ApiDocument, DocumentOriginal
from knowledge.parsing import SUPPORTED_SUFFIXES, render_document


def documents_export(*, directory: Path, domain: str | None = None) -> list[Path]:
    """Write each document to ``directory/<doc key>`` with its frontmatter (a converted format,
    PDF, DOCX..., as its original file: re-importing it is "unchanged"). Returns the files."""
    root = directory.resolve()
    root.mkdir(parents=True, exist_ok=True)
    documents = ApiDocument.objects.order_by("doc_key")
    if domain:
        documents = documents.filter(domain=domain)
    written: list[Path] = []
    for document in documents.iterator():
        fmt = (document.metadata or {}).get("format", "markdown")
        name = document.doc_key
        if PurePosixPath(name.lower()).suffix not in SUPPORTED_SUFFIXES:
            name += ".md" if fmt == "markdown" else ".txt"
        target = (root / name).resolve()
        if not target.is_relative_to(root):  # doc keys are normalised on upload; belt and braces
            raise ValueError(f"doc key '{document.doc_key}' would be written outside {root}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if fmt in CONVERTED_FORMATS.values():
            original = DocumentOriginal.objects.filter(document_id=document.pk).first()
            if original is not None:
                target.write_bytes(bytes(original.data))
                written.append(target)
                continue
        target.write_text(
            render_document(
                title=document.title,
                domain=document.domain,
                body=document.content,
                metadata=document.metadata or {},
                fmt=fmt,
            ),
            encoding="utf-8",
        )
        written.append(target)
    return written
