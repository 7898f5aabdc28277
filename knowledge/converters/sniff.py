"""Cheap checks at upload, before anything is stored: are the bytes what the name says, and is
an Office package safe to open? Nothing here parses a document; a refusal names the reason.

- magic bytes: a ``.pdf`` must be a PDF, an OOXML file (``.docx``/``.pptx``/``.xlsx``) a zip
  holding that kind's main part; text formats must not be a known binary type;
- OOXML packages: at most ``MAX_MEMBERS`` members, declared unpacked size within
  ``INGEST_MAX_UNZIPPED_BYTES``, no member compressed more than ``MAX_RATIO`` times (a zip
  bomb), no XML part with a DOCTYPE or entity declaration (external entities, billion laughs);
- PDF: not encrypted (its trailer names an ``/Encrypt`` dictionary).
"""

from __future__ import annotations

import io
import re
import zipfile

from knowledge.converters.base import ConversionError, Limits

MAX_MEMBERS = 10_000
MAX_RATIO = 200
_RATIO_FLOOR = 1024 * 1024  # small members may compress well; only big ones count as bombs
_XML_HEAD_BYTES = 4096

_MAGIC = (
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive (or an Office .docx/.pptx/.xlsx file)"),
    (b"PK\x05\x06", "an empty ZIP archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old binary or encrypted Office file (.doc/.xls/.ppt)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!", "a RAR archive"),
    (b"\x7fELF", "a Linux executable"),
    (b"MZ", "a Windows executable"),
)
_MAIN_PART = {"docx": "word/document.xml", "pptx": "ppt/presentation.xml", "xlsx": "xl/workbook.xml"}
_KIND_BY_PART = {
    "word/document.xml": "a Word document (.docx)",
    "ppt/presentation.xml": "a PowerPoint deck (.pptx)",
    "xl/workbook.xml": "an Excel workbook (.xlsx)",
}
_DECLARATION = re.compile(rb"<!DOCTYPE|<!ENTITY", re.IGNORECASE)
_ENCRYPT = re.compile(rb"/Encrypt\s*(?:\d+\s+\d+\s+R|<<)")


def detected_type(data: bytes) -> str | None:
    """What the leading bytes say the file is (None for text and unknown types)."""
    head = data[:16]
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    if b"%PDF-" in data[:1024]:  # PDF allows junk before its header
        return "a PDF"
    return None


def _mismatch(name: str, expected: str, found: str | None) -> ConversionError:
    what = found or "not that (unrecognised bytes)"
    return ConversionError(
        f"'{name}' is named as {expected} but its bytes are {what}; the extension does not match the content"
    )


def sniff(data: bytes, *, fmt: str, name: str, limits: Limits) -> None:
    """Refuse ``data`` (ConversionError) unless it is a plausible, safe file of format ``fmt``.

    ``fmt``: "pdf", "docx", "pptx", "xlsx", or a text format ("html", "csv", "markdown", "text").
    """
    found = detected_type(data)
    if fmt == "pdf":
        if found != "a PDF":
            raise _mismatch(name, "a PDF", found)
        if _ENCRYPT.search(data):
            raise ConversionError("is an encrypted PDF; upload an unencrypted copy")
        return
    if fmt in _MAIN_PART:
        if found is None or not found.startswith("a ZIP"):
            raise _mismatch(name, f"a .{fmt} file", found)
        _check_package(data, fmt=fmt, name=name, limits=limits)
        return
    if found is not None:
        raise _mismatch(name, f"a {fmt} text file", found)


def _check_package(data: bytes, *, fmt: str, name: str, limits: Limits) -> None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise ConversionError(f"is not a valid .{fmt} file (broken zip: {exc})") from exc
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise ConversionError(f"holds {len(members):,} parts; at most {MAX_MEMBERS:,} (a zip bomb?)")
        names = {m.filename for m in members}
        main = _MAIN_PART[fmt]
        if main not in names or "[Content_Types].xml" not in names:
            other = next((kind for part, kind in _KIND_BY_PART.items() if part in names), None)
            raise _mismatch(name, f"a .{fmt} file", other or "a ZIP archive that is no Office document")
        declared = sum(m.file_size for m in members)
        if declared > limits.max_unzipped_bytes:
            raise ConversionError(
                f"unpacks to {declared:,} bytes; the limit is {limits.max_unzipped_bytes:,} "
                "(INGEST_MAX_UNZIPPED_BYTES; a zip bomb?)"
            )
        for member in members:
            if member.flag_bits & 0x1:
                raise ConversionError("holds encrypted parts; upload an unencrypted copy")
            if member.file_size > _RATIO_FLOOR and member.file_size > MAX_RATIO * max(
                member.compress_size, 1
            ):
                raise ConversionError(
                    f"part '{member.filename}' is compressed {member.file_size // max(member.compress_size, 1):,} "
                    f"times (a zip bomb?); at most {MAX_RATIO}"
                )
            if member.filename.endswith((".xml", ".rels")):
                try:
                    with archive.open(member) as part:
                        head = part.read(_XML_HEAD_BYTES)
                except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
                    raise ConversionError(f"part '{member.filename}' cannot be read: {exc}") from exc
                if _DECLARATION.search(head):
                    raise ConversionError(
                        f"part '{member.filename}' declares a DOCTYPE or XML entities (external "
                        "entities are refused)"
                    )
