"""Batches of files (several files, a .zip of a folder tree, or folders on disk) into documents.

Limits (settings, environment-overridable): ``INGEST_MAX_FILE_BYTES`` per file,
``INGEST_MAX_FILES_PER_UPLOAD`` files per upload or zip, ``INGEST_MAX_UNZIPPED_BYTES`` per zip.
A limit violation, a broken zip, a path that climbs out of the zip or two files with one name
reject the whole upload before anything is stored (UploadRejected). Past that, each file is its
own outcome: added / updated / unchanged, or failed with the reason (bad encoding, no domain...).

Domain of a file: its frontmatter's, else the domain chosen for the upload, else the top folder
of its path inside the zip or folder (``payment/refunds.md`` -> ``payment``).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from django.conf import settings

from knowledge.parsing import SUPPORTED_SUFFIXES, DocumentParseError, normalise_doc_key
from knowledge.services.documents import FAILED, IngestFile, IngestResult, documents_ingest
from knowledge.services.index_queue import IndexQueue

#: files a bulk ingest stores together (one transaction for its new documents); the progress
#: of an import moves a group at a time
INGEST_GROUP_FILES = 100


class UploadRejected(ValueError):
    """The upload as a whole breaks a rule; nothing was stored. ``field`` names the form field."""

    def __init__(self, message: str, *, field: str = "files") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class UploadItem:
    name: str  # path inside the upload: the doc key
    data: bytes
    #: the top folder of ``name`` when it has one: the domain when neither frontmatter nor upload name one
    folder_domain: str | None = None
    #: why this file cannot be a document (unsupported type); reported, not stored
    skip_reason: str = ""


def _is_junk(path: str) -> bool:
    """Files every zip tool adds: macOS resource forks, Finder and Windows thumbnails, dotfiles."""
    # Backslashes as separators (zips from some Windows tools): "..\\evil.md" is a climb to
    # refuse by name, not a dotfile to skip silently.
    parts = PurePosixPath(path.replace("\\", "/")).parts
    hidden = any(p.startswith(".") and p not in (".", "..") for p in parts)  # ".." is refused, not skipped
    return hidden or "__MACOSX" in parts or parts[-1] in ("Thumbs.db", "desktop.ini")


def _top_folder(path: str) -> str | None:
    parts = PurePosixPath(path).parts
    return parts[0] if len(parts) > 1 else None


def _zip_member_name(info: zipfile.ZipInfo) -> str:
    """Zips from Chinese Windows store GBK names without the UTF-8 flag; Python reads them as cp437."""
    if info.flag_bits & 0x800:
        return info.filename
    raw = info.filename.encode("cp437")
    for encoding in ("utf-8", "gb18030"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return info.filename


def _limit_file(name: str, size: int) -> None:
    limit = settings.INGEST_MAX_FILE_BYTES
    if size > limit:
        raise UploadRejected(
            f"'{name}' is {size:,} bytes; the limit is {limit:,} bytes per file (INGEST_MAX_FILE_BYTES)"
        )


def _limit_count(count: int) -> None:
    limit = settings.INGEST_MAX_FILES_PER_UPLOAD
    if count > limit:
        raise UploadRejected(
            f"the upload holds {count} files; the limit is {limit} (INGEST_MAX_FILES_PER_UPLOAD)"
        )


def _item(name: str, data: bytes, *, in_folder: bool) -> UploadItem:
    try:
        key = normalise_doc_key(name)
    except DocumentParseError as exc:
        raise UploadRejected(f"'{name}': {exc.message}") from exc
    skip = ""
    if PurePosixPath(key.lower()).suffix not in SUPPORTED_SUFFIXES:
        skip = f"file: '{key}' is not a supported format (use {', '.join(SUPPORTED_SUFFIXES)})"
    return UploadItem(
        name=key, data=data, folder_domain=_top_folder(key) if in_folder else None, skip_reason=skip
    )


def zip_items(data: bytes, *, zip_name: str = "upload.zip") -> list[UploadItem]:
    """The files of a zip, checked against the limits before any is decompressed in full."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise UploadRejected(f"'{zip_name}' is not a valid zip file: {exc}") from exc
    with archive:
        members = [
            (info, _zip_member_name(info))
            for info in archive.infolist()
            if not info.is_dir() and not _is_junk(_zip_member_name(info))
        ]
        _limit_count(len(members))
        total_limit = settings.INGEST_MAX_UNZIPPED_BYTES
        declared = sum(info.file_size for info, _ in members)
        if declared > total_limit:
            raise UploadRejected(
                f"'{zip_name}' unpacks to {declared:,} bytes; the limit is {total_limit:,} "
                "(INGEST_MAX_UNZIPPED_BYTES)"
            )
        items: list[UploadItem] = []
        total = 0
        for info, name in members:
            if info.flag_bits & 0x1:
                raise UploadRejected(f"'{zip_name}' holds encrypted files; upload an unencrypted zip")
            _limit_file(name, info.file_size)
            # The sizes in a zip's headers can lie (a zip bomb): read at most one byte past the limit.
            try:
                with archive.open(info) as member:
                    content = member.read(settings.INGEST_MAX_FILE_BYTES + 1)
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
                raise UploadRejected(f"'{zip_name}': cannot read '{name}': {exc}") from exc
            _limit_file(name, len(content))
            total += len(content)
            if total > total_limit:
                raise UploadRejected(
                    f"'{zip_name}' unpacks to more than {total_limit:,} bytes (INGEST_MAX_UNZIPPED_BYTES)"
                )
            items.append(_item(name, content, in_folder=True))
    return items


def upload_items(files: Iterable[tuple[str, bytes]]) -> list[UploadItem]:
    """Uploaded files (zips expanded) as items; raises UploadRejected if the upload breaks a rule.

    A picked file's own fault (too large, an unsupported type; empty or unreadable ones fail when
    parsed) is that file's row: the upload goes on with the others."""
    items: list[UploadItem] = []
    for name, data in files:
        if name.lower().endswith(".zip"):
            items.extend(zip_items(data, zip_name=name))
        else:
            item = _item(PurePosixPath(name.replace("\\", "/")).name, data, in_folder=False)
            if len(data) > settings.INGEST_MAX_FILE_BYTES:
                # One picked file over the limit is refused on its own row; the others are stored.
                # (A zip's members are not: a zip is checked, and refused, as one archive.)
                item = replace(
                    item,
                    data=b"",
                    skip_reason=f"file: is larger than the limit of {settings.INGEST_MAX_FILE_BYTES:,} "
                    "bytes (INGEST_MAX_FILE_BYTES)",
                )
            items.append(item)
    if not items:
        raise UploadRejected("no files to upload")
    _limit_count(len(items))
    seen: set[str] = set()
    for item in items:
        if item.name in seen:
            raise UploadRejected(f"two files are named '{item.name}'; each document needs its own name")
        seen.add(item.name)
    return items


def folder_items(paths: Iterable[Path]) -> list[UploadItem]:
    """Files and folders on disk (``import_documents``). A folder's files are named by their path
    below it, so its subfolders act as domains; a single file is named by its file name.
    No file-count limit here: this is the operator's bulk path."""
    items: list[UploadItem] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                relative = file.relative_to(path).as_posix()
                if _is_junk(relative):
                    continue
                items.append(_disk_item(file, relative, in_folder=True))
        elif path.is_file():
            if path.suffix.lower() == ".zip":
                items.extend(zip_items(path.read_bytes(), zip_name=path.name))
            else:
                items.append(_disk_item(path, path.name, in_folder=False))
        else:
            raise UploadRejected(f"'{path}' does not exist", field="path")
    seen: set[str] = set()
    for item in items:
        if item.name in seen:
            raise UploadRejected(f"two files are named '{item.name}'; each document needs its own name")
        seen.add(item.name)
    return items


def _disk_item(file: Path, name: str, *, in_folder: bool) -> UploadItem:
    size = file.stat().st_size
    if size > settings.INGEST_MAX_FILE_BYTES:
        # One oversized file on disk is that file's failure, not the whole import's.
        return UploadItem(
            name=name,
            data=b"",
            skip_reason=f"file: is {size:,} bytes; the limit is {settings.INGEST_MAX_FILE_BYTES:,} "
            "bytes (INGEST_MAX_FILE_BYTES)",
        )
    return _item(name, file.read_bytes(), in_folder=in_folder)


def items_ingest(
    *,
    items: list[UploadItem],
    domain: str | None = None,
    progress: Callable[[IngestResult], None] | None = None,
) -> list[IngestResult]:
    """Ingest each item (one bad file does not stop the others; new documents are stored a group
    at a time, ``documents_ingest``), then queue the indexing of all of them together (batch
    tasks: embedding batches filled across files). ``progress`` is called per file once its
    group is stored."""
    results: list[IngestResult] = []
    queue = IndexQueue()
    for start in range(0, len(items), INGEST_GROUP_FILES):
        group = items[start : start + INGEST_GROUP_FILES]
        stored = iter(
            documents_ingest(
                files=[
                    IngestFile(data=item.data, name=item.name, domain=domain or item.folder_domain)
                    for item in group
                    if not item.skip_reason
                ],
                index_queue=queue,
            )
        )
        for item in group:
            if item.skip_reason:
                result = IngestResult(outcome=FAILED, name=item.name, error=item.skip_reason)
            else:
                result = next(stored)
            results.append(result)
            if progress is not None:
                progress(result)
    queue.send_on_commit()
    return results


def documents_upload(*, files: Iterable[tuple[str, bytes]], domain: str | None = None) -> list[IngestResult]:
    """The admin's bulk upload: check the whole upload, then ingest each file."""
    return items_ingest(items=upload_items(files), domain=domain)
