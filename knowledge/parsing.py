"""Turn an uploaded file (raw bytes + its name) into a document: text, title, domain, metadata.

Formats: Markdown (``.md``, ``.markdown``) and plain text (``.txt``), parsed here; PDF, DOCX,
PPTX, XLSX, CSV and HTML, which ``knowledge.converters`` turns into Markdown in the worker (here
they are only sniffed: magic bytes, zip bombs, XML entities, encryption; see that package).
Text bytes are read as UTF-8 (with or without BOM), then GB18030; anything else is refused with
a clear error. Markdown may
start with YAML frontmatter::

    ---
    title: 支付失败排查手册
    domain: payment            # alias: category
    keywords: [支付失败, ERR_PAY_TIMEOUT]
    aliases: [payment failure]
    covers: [支付超时, 扣款无回调]
    when_to_retrieve: 用户描述支付失败、超时时
    description: How to investigate failed payments
    ---

No title: the first heading, else the file name. No domain: the one chosen at upload (or the
upload's top folder); none at all is an error. Parsing never touches the database.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml
from django.conf import settings

from knowledge.converters.base import CONVERTED_FORMATS, ConversionError, Limits
from knowledge.converters.sniff import sniff
from knowledge.converters.text import bytes_to_text

MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIXES = (".txt",)
SUPPORTED_SUFFIXES = MARKDOWN_SUFFIXES + TEXT_SUFFIXES + tuple(CONVERTED_FORMATS)

#: Frontmatter keys with a meaning; anything else is kept verbatim in ``metadata["extra"]``.
KNOWN_KEYS = (
    "title",
    "domain",
    "category",
    "keywords",
    "aliases",
    "covers",
    "when_to_retrieve",
    "description",
)
#: Metadata keys this module owns: a re-upload replaces them (other keys, such as generated
#: summaries, belong to other services and survive a re-upload).
OWNED_METADATA_KEYS = (
    "keywords",
    "aliases",
    "description",
    "extra",
    "format",
    "encoding",
    "source_name",
    "frontmatter_keys",
    "page_count",
    "text_sha256",
)

MAX_DOC_KEY_CHARS = 255
MAX_TITLE_CHARS = 255
MAX_DOMAIN_CHARS = 64
# Frontmatter is a few lines of metadata; a huge block is an attack or a mistake.
MAX_FRONTMATTER_CHARS = 64 * 1024
MAX_LIST_ITEMS = 200
MAX_ITEM_CHARS = 200

_DOMAIN_RE = re.compile(r"^[\w][\w.-]*$")
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class DocumentParseError(ValueError):
    """The file cannot become a document. ``field`` names what is wrong (file, frontmatter, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ParsedDocument:
    doc_key: str
    title: str
    domain: str
    body: str  # the text without frontmatter, newlines normalised to \n
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""

    @property
    def is_markdown(self) -> bool:
        return self.metadata.get("format") == "markdown"


# --- bytes to text ------------------------------------------------------------------------------
def decode_text(data: bytes) -> tuple[str, str]:
    """(text, encoding name). UTF-8 with BOM, UTF-8, then GB18030; other bytes are refused
    (DocumentParseError on "file")."""
    try:
        return bytes_to_text(data)
    except ConversionError as exc:
        raise DocumentParseError("file", exc.reason) from exc


# --- names -------------------------------------------------------------------------------------
def normalise_doc_key(name: str) -> str:
    """A clean relative POSIX path: the document's stable key (the seeds' filePath)."""
    raw = (name or "").replace("\\", "/").strip()
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if not parts:
        raise DocumentParseError("doc_key", "is empty")
    if any(p == ".." for p in parts):
        raise DocumentParseError("doc_key", f"'{name}' climbs out of its folder ('..')")
    if any(unicodedata.category(ch) == "Cc" for p in parts for ch in p):
        raise DocumentParseError("doc_key", f"'{name}' contains control characters")
    key = "/".join(parts)
    if len(key) > MAX_DOC_KEY_CHARS:
        raise DocumentParseError("doc_key", f"is {len(key)} characters long; at most {MAX_DOC_KEY_CHARS}")
    return key


def validate_domain(value: Any, *, field_name: str = "domain") -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # `domain: 2024` in YAML is a number
    if not isinstance(value, str):
        raise DocumentParseError(field_name, f"must be a string, got {type(value).__name__}")
    domain = value.strip()
    if not domain:
        raise DocumentParseError(field_name, "is empty")
    if len(domain) > MAX_DOMAIN_CHARS:
        raise DocumentParseError(field_name, f"'{domain[:80]}' is longer than {MAX_DOMAIN_CHARS} characters")
    if not _DOMAIN_RE.match(domain):
        raise DocumentParseError(
            field_name, f"'{domain}' may hold only letters, digits, '_', '-' and '.' (no spaces or slashes)"
        )
    return domain


def file_format(name: str) -> str:
    suffix = PurePosixPath(name.lower()).suffix
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in CONVERTED_FORMATS:
        return CONVERTED_FORMATS[suffix]
    raise DocumentParseError(
        "file", f"'{name}' is not a supported format (use {', '.join(SUPPORTED_SUFFIXES)})"
    )


# --- frontmatter -------------------------------------------------------------------------------
class _NoAliasSafeLoader(yaml.SafeLoader):
    """SafeLoader without anchors/aliases: a few lines of aliases can expand to gigabytes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in frontmatter", event.start_mark
            )
        return super().compose_node(parent, index)


def _yaml_safe_load_without_aliases(block: str) -> Any:
    """SafeLoader's result, aliases refused. With libyaml (PyYAML's C loader, when built with it)
    the events are read first, in C, to refuse an alias, then the block loaded in C: about 0.07 ms
    a frontmatter against 0.45 ms in pure Python, paid by every document ingested."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return yaml.load(block, Loader=_NoAliasSafeLoader)  # a SafeLoader subclass
    for event in yaml.parse(block, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in frontmatter", event.start_mark
            )
    return yaml.load(block, Loader=loader)  # CSafeLoader: the safe loader, in C


def split_frontmatter(text: str) -> tuple[dict[str, Any] | None, str]:
    """(frontmatter mapping or None, body). Frontmatter is a leading ``---`` ... ``---`` block."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return None, text
    for end in range(1, len(lines)):
        if lines[end].rstrip() in ("---", "..."):
            break
    else:
        raise DocumentParseError("frontmatter", "starts with '---' but has no closing '---' line")
    block = "\n".join(lines[1:end])
    if len(block) > MAX_FRONTMATTER_CHARS:
        raise DocumentParseError(
            "frontmatter", f"is {len(block)} characters long; at most {MAX_FRONTMATTER_CHARS}"
        )
    try:
        data = _yaml_safe_load_without_aliases(block)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""  # +1 for '---', +1 for 1-based
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DocumentParseError("frontmatter", f"invalid YAML{where}: {problem}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise DocumentParseError(
            "frontmatter", f"must be a mapping of keys to values, got {type(data).__name__}"
        )
    return data, "\n".join(lines[end + 1 :])


def _string(value: Any, field_name: str, *, max_chars: int | None = None) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise DocumentParseError(field_name, f"must be a string, got {type(value).__name__}")
    text = str(value).strip()
    if max_chars is not None and len(text) > max_chars:
        raise DocumentParseError(field_name, f"is {len(text)} characters long; at most {max_chars}")
    return text


def _string_list(value: Any, field_name: str) -> list[str]:
    """A list of strings; a comma-separated string is accepted as a convenience."""
    if value is None:
        return []
    if isinstance(value, str):
        value = re.split(r"[,，、]", value)
    if not isinstance(value, list):
        raise DocumentParseError(field_name, f"must be a list of strings, got {type(value).__name__}")
    if len(value) > MAX_LIST_ITEMS:
        raise DocumentParseError(field_name, f"has {len(value)} items; at most {MAX_LIST_ITEMS}")
    items: list[str] = []
    for position, item in enumerate(value, start=1):
        text = _string(item, f"{field_name}[{position}]", max_chars=MAX_ITEM_CHARS)
        if text and text not in items:
            items.append(text)
    return items


def _json_safe(value: Any) -> Any:
    """Frontmatter may hold dates and other YAML types; metadata is JSON."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


# --- title -------------------------------------------------------------------------------------
def first_heading(body: str) -> str | None:
    in_fence: str | None = None
    for line in body.split("\n"):
        fence = _FENCE_OPEN.match(line)
        if fence:
            marker = fence.group(1)
            if in_fence is None:
                in_fence = marker
            elif marker[0] == in_fence[0] and len(marker) >= len(in_fence):
                in_fence = None
            continue
        if in_fence is None:
            match = _ATX_HEADING.match(line)
            if match:
                return match.group(2).strip()
    return None


# --- the whole thing ---------------------------------------------------------------------------
def content_hash_of(*, title: str, domain: str, body: str, metadata: dict[str, Any]) -> str:
    """What decides "unchanged": the parsed document, not the bytes, so an export re-imports
    as unchanged even though its frontmatter is written anew."""
    canonical = {
        "title": title,
        "domain": domain,
        "body": body,
        **{k: metadata.get(k) for k in ("keywords", "aliases", "description", "extra")},
        **{k: metadata.get(k) for k in ("covers", "when_to_retrieve") if k in metadata},
    }
    payload = json.dumps(canonical, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def conversion_limits() -> Limits:
    return Limits(
        max_pages=settings.INGEST_MAX_PDF_PAGES,
        max_chars=settings.INGEST_MAX_CONVERTED_CHARS,
        max_unzipped_bytes=settings.INGEST_MAX_UNZIPPED_BYTES,
    )


def original_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _parse_convertible(data: bytes, *, doc_key: str, fmt: str, domain: str | None) -> ParsedDocument:
    """A file the worker converts: checked (sniffed) now, its text and title come later."""
    try:
        sniff(data, fmt=fmt, name=PurePosixPath(doc_key).name, limits=conversion_limits())
    except ConversionError as exc:
        raise DocumentParseError("file", exc.reason) from exc
    if not domain:
        raise DocumentParseError("domain", f"a .{fmt} file names no domain; choose one at upload")
    chosen = validate_domain(domain)
    digest = original_sha256(data)
    # No text_sha256: the text comes from the worker's conversion (knowledge.services.versions).
    metadata = {"format": fmt, "source_name": PurePosixPath(doc_key).name}
    # The bytes decide "unchanged" (with the domain they go to): the text is not known yet.
    content_hash = hashlib.sha256(f"{fmt}\0{chosen}\0{digest}".encode()).hexdigest()
    return ParsedDocument(
        doc_key=doc_key,
        title=PurePosixPath(doc_key).stem[:MAX_TITLE_CHARS],
        domain=chosen,
        body="",
        metadata=metadata,
        content_hash=content_hash,
    )


def parsed_from_conversion(
    *,
    doc_key: str,
    domain: str,
    fmt: str,
    markdown: str,
    title: str,
    keywords: list[str],
    description: str,
    page_count: int | None,
    text_sha256: str,
) -> ParsedDocument:
    """The document a converter's Markdown makes (the worker's half of ``_parse_convertible``)."""
    metadata: dict[str, Any] = {
        "keywords": _string_list(keywords[:MAX_LIST_ITEMS], "keywords"),
        "aliases": [],
        "description": description[:2000],
        "extra": {},
        "format": fmt,
        "source_name": PurePosixPath(doc_key).name,
        "text_sha256": text_sha256,
    }
    if page_count is not None:
        metadata["page_count"] = page_count
    title = (title or first_heading(markdown) or PurePosixPath(doc_key).stem)[:MAX_TITLE_CHARS]
    return ParsedDocument(doc_key=doc_key, title=title, domain=domain, body=markdown, metadata=metadata)


def parse_document(data: bytes, *, name: str, domain: str | None = None) -> ParsedDocument:
    """Parse one uploaded file. ``name`` is its path inside the upload (becomes the doc key);
    ``domain`` applies when the frontmatter names none. Raises DocumentParseError."""
    doc_key = normalise_doc_key(name)
    fmt = file_format(doc_key)
    if fmt in CONVERTED_FORMATS.values():
        if not data.strip():
            raise DocumentParseError("file", "is empty")
        return _parse_convertible(data, doc_key=doc_key, fmt=fmt, domain=domain)
    try:
        sniff(data, fmt=fmt, name=PurePosixPath(doc_key).name, limits=conversion_limits())
    except ConversionError as exc:
        raise DocumentParseError("file", exc.reason) from exc
    text, encoding = decode_text(data)
    text = text.replace("\r\n", "\n").replace("\r", "\n")

    front: dict[str, Any] = {}
    body = text
    if fmt == "markdown":
        parsed_front, body = split_frontmatter(text)
        front = parsed_front or {}
    body = body.strip("\n")
    if not body.strip():
        raise DocumentParseError("file", "has no text besides its frontmatter")

    metadata: dict[str, Any] = {
        "keywords": _string_list(front.get("keywords"), "keywords"),
        "aliases": _string_list(front.get("aliases"), "aliases"),
        "description": _string(front["description"], "description", max_chars=2000)
        if front.get("description") is not None
        else "",
        "format": fmt,
        "encoding": encoding,
        "source_name": PurePosixPath(doc_key).name,
        # Which uploaded bytes this text comes from (knowledge.services.versions).
        "text_sha256": original_sha256(data),
    }
    if front.get("covers") is not None:
        metadata["covers"] = _string_list(front["covers"], "covers")
        metadata["covers_source"] = "manual"
    if front.get("when_to_retrieve") is not None:
        metadata["when_to_retrieve"] = _string(front["when_to_retrieve"], "when_to_retrieve", max_chars=4000)
        metadata["when_to_retrieve_source"] = "manual"
    extra = {k: v for k, v in front.items() if k not in KNOWN_KEYS}
    metadata["extra"] = _json_safe({str(k): v for k, v in extra.items()})
    metadata["frontmatter_keys"] = sorted(str(k) for k in front)

    title = ""
    if front.get("title") is not None:
        title = _string(front["title"], "title")
    if not title and fmt == "markdown":
        title = first_heading(body) or ""
    if not title:
        title = PurePosixPath(doc_key).stem
    title = title[:MAX_TITLE_CHARS]

    if "domain" in front and "category" in front and front["domain"] != front["category"]:
        raise DocumentParseError(
            "domain", "frontmatter names both 'domain' and 'category' with different values"
        )
    front_domain = front.get("domain", front.get("category"))
    if front_domain is not None:
        chosen = validate_domain(front_domain, field_name="domain" if "domain" in front else "category")
    elif domain:
        chosen = validate_domain(domain)
    else:
        raise DocumentParseError(
            "domain", "the frontmatter names no domain and none was chosen at upload; choose one"
        )

    return ParsedDocument(
        doc_key=doc_key,
        title=title,
        domain=chosen,
        body=body,
        metadata=metadata,
        content_hash=content_hash_of(title=title, domain=chosen, body=body, metadata=metadata),
    )


def render_document(*, title: str, domain: str, body: str, metadata: dict[str, Any], fmt: str) -> str:
    """The file a document came from, frontmatter included: what ``export_documents`` writes.

    Only what an upload owns is written (generated summaries are not: they are regenerated), so
    re-importing the export leaves every document unchanged.
    """
    if fmt != "markdown":
        return body + "\n"
    front: dict[str, Any] = {"title": title, "domain": domain}
    for key in ("keywords", "aliases"):
        if metadata.get(key):
            front[key] = list(metadata[key])
    if "covers" in metadata and metadata.get("covers_source") == "manual":
        front["covers"] = list(metadata["covers"])
    if "when_to_retrieve" in metadata and metadata.get("when_to_retrieve_source") == "manual":
        front["when_to_retrieve"] = metadata["when_to_retrieve"]
    if metadata.get("description"):
        front["description"] = metadata["description"]
    for key, value in (metadata.get("extra") or {}).items():
        front.setdefault(key, value)
    block = yaml.safe_dump(front, allow_unicode=True, sort_keys=False, width=1000)
    return f"---\n{block}---\n\n{body}\n"
