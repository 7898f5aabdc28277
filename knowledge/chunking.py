"""Split a document into searchable chunks.

Rules, in order of precedence:

1. A code fence or a table is never split: it always lands whole in one chunk, even when it is
   larger than the target (an oversized one becomes a chunk of its own).
2. Markdown headings start a new chunk; every chunk keeps its heading path (``A > B > C``).
   A heading line stays glued to the text that follows it; a heading with no text of its own is
   carried into the next section's first chunk.
3. Within a section, blocks are packed up to ``target`` size; a paragraph larger than that is cut
   at sentence ends (Chinese 。！？； and Western .!?), then at spaces, then anywhere.
4. Neighbouring chunks of one section overlap by up to ``overlap``: the next chunk repeats the
   previous chunk's last sentences (never part of a fence or a table).

Paged documents (converted PDFs and slide decks) carry ``<!-- page N -->`` lines where each page
starts. They are not text: the chunker drops them and gives every chunk the pages its text comes
from (``Chunk.pages``), so an agent can cite "page 3".

Sizes are CJK-aware: a CJK character counts as two. One CJK character carries roughly what a
short English word does and costs about one model token, so counting it as two keeps a chunk of
Chinese text inside the embedding model's token window (512) when the target is 800.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CJK = re.compile(
    "[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f"
    "\uff00-\uffef\U00020000-\U0003134f]"
)
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_HEADING_EMPTY = re.compile(r"^ {0,3}(#{1,6})[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_PAGE_MARKER = re.compile(r"^<!-- page (\d{1,6}) -->$")
_TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")
# A sentence ends at Chinese/Western end punctuation (with closing quotes or brackets), at a
# full stop followed by a space, or at a line end; the whitespace after it stays with it.
_SENTENCE_END = re.compile(r"(?:[。！？；!?…]+[”’」』）)\"']*|\.(?=\s)|\n)\s*")


def page_marker(number: int) -> str:
    """The line that says page ``number`` starts here (written by the PDF and PPTX converters)."""
    return f"<!-- page {number} -->"


def text_size(text: str) -> int:
    """Length with CJK characters counted twice."""
    return len(text) + len(_CJK.findall(text))


@dataclass(frozen=True)
class Chunk:
    index: int
    heading_path: tuple[str, ...]
    content: str
    #: how many leading characters of ``content`` repeat the end of the previous chunk
    overlap_chars: int = 0
    #: the pages the chunk's own text comes from (paged documents only)
    pages: tuple[int, ...] = ()

    @property
    def pages_text(self) -> str:
        """``"3"`` or ``"3-4"``; empty for documents without pages."""
        if not self.pages:
            return ""
        first, last = min(self.pages), max(self.pages)
        return str(first) if first == last else f"{first}-{last}"

    @property
    def heading_path_text(self) -> str:
        return " > ".join(self.heading_path)

    @property
    def own_text(self) -> str:
        """The chunk without its overlap: the chunks' own texts in order cover the document."""
        return self.content[self.overlap_chars :]


@dataclass
class _Block:
    kind: str  # "text", "code", "table"
    text: str
    page: int | None = None


@dataclass
class _Section:
    path: tuple[str, ...]
    heading: str  # the heading line itself ("" before the first heading)
    blocks: list[_Block]
    page: int | None = None  # the page the heading is on


# --- reading blocks ----------------------------------------------------------------------------
def _is_table_start(lines: list[str], i: int) -> bool:
    return (
        "|" in lines[i]
        and i + 1 < len(lines)
        and bool(_TABLE_DELIMITER.match(lines[i + 1]))
        and ("|" in lines[i + 1])
    )


def _sections(body: str, *, markdown: bool) -> list[_Section]:
    lines = body.split("\n")
    sections = [_Section(path=(), heading="", blocks=[])]
    stack: list[tuple[int, str]] = []
    paragraph: list[str] = []
    page: int | None = None

    def end_paragraph() -> None:
        if paragraph:
            sections[-1].blocks.append(_Block("text", "\n".join(paragraph), page))
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        marker = _PAGE_MARKER.match(line.strip()) if markdown else None
        if marker:
            end_paragraph()
            page = int(marker.group(1))
            if not sections[-1].blocks and sections[-1].page is None:
                sections[-1].page = page
            i += 1
            continue
        if not markdown:
            if line.strip():
                paragraph.append(line)
            else:
                end_paragraph()
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            end_paragraph()
            marker = fence.group(1)
            j = i + 1
            while j < len(lines):
                close = _FENCE.match(lines[j])
                if (
                    close
                    and close.group(1)[0] == marker[0]
                    and len(close.group(1)) >= len(marker)
                    and not close.group(2).strip()
                ):
                    break
                j += 1
            # An unclosed fence runs to the end of the document, as CommonMark reads it.
            sections[-1].blocks.append(_Block("code", "\n".join(lines[i : j + 1]), page))
            i = j + 1
            continue
        heading = _HEADING.match(line) or _HEADING_EMPTY.match(line)
        if heading:
            end_paragraph()
            level = len(heading.group(1))
            title = heading.group(2).strip() if heading.lastindex and heading.lastindex >= 2 else ""
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            sections.append(
                _Section(path=tuple(t for _, t in stack if t), heading=line.strip(), blocks=[], page=page)
            )
            i += 1
            continue
        if _is_table_start(lines, i):
            end_paragraph()
            j = i + 2
            while j < len(lines) and lines[j].strip() and "|" in lines[j]:
                j += 1
            sections[-1].blocks.append(_Block("table", "\n".join(lines[i:j]), page))
            i = j
            continue
        if line.strip():
            paragraph.append(line)
        else:
            end_paragraph()
        i += 1
    end_paragraph()
    return [s for s in sections if s.heading or s.blocks]


# --- splitting text ----------------------------------------------------------------------------
def split_sentences(text: str) -> list[str]:
    """Consecutive pieces of ``text`` (joined they give it back), each ending a sentence."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > start:
            pieces.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _prefix_within(text: str, limit: int) -> int:
    """Length of the longest prefix whose size is at most ``limit`` (at least 1)."""
    size = 0
    for position, ch in enumerate(text):
        size += 2 if _CJK.match(ch) else 1
        if size > limit:
            return max(position, 1)
    return len(text)


def _hard_split(text: str, limit: int) -> list[str]:
    """Cut an over-long sentence: at a space when one is near the limit, else anywhere (CJK)."""
    pieces: list[str] = []
    while text_size(text) > limit:
        n = _prefix_within(text, limit)
        cut = text.rfind(" ", 0, n)
        cut = cut + 1 if cut > n // 2 else n
        pieces.append(text[:cut])
        text = text[cut:]
    if text:
        pieces.append(text)
    return pieces


def _text_pieces(text: str, limit: int) -> list[str]:
    if text_size(text) <= limit:
        return [text]
    pieces: list[str] = []
    for sentence in split_sentences(text):
        pieces.extend(_hard_split(sentence, limit) if text_size(sentence) > limit else [sentence])
    return pieces


# --- packing -----------------------------------------------------------------------------------
@dataclass
class _Piece:
    text: str
    joiner: str  # what goes between the previous piece and this one
    splittable: bool  # prose (may be repeated as overlap) vs a fence/table/heading
    pages: tuple[int, ...] = ()


def _section_pieces(section: _Section, carried: str, target: int) -> list[_Piece]:
    """The section as a list of pieces; its heading (and any carried heading) glued to the first."""
    prefix = "\n\n".join(p for p in (carried, section.heading) if p)
    pieces: list[_Piece] = []
    for block in section.blocks:
        pages = (block.page,) if block.page is not None else ()
        if block.kind == "text":
            parts = _text_pieces(block.text, target)
            pieces.append(_Piece(parts[0], "\n\n", True, pages))
            pieces.extend(_Piece(p, "", True, pages) for p in parts[1:])
        else:
            pieces.append(_Piece(block.text, "\n\n", False, pages))
    heading_pages = (section.page,) if section.page is not None and section.heading else ()
    if prefix:
        if pieces:
            first = pieces[0]
            pieces[0] = _Piece(prefix + "\n\n" + first.text, "\n\n", False, heading_pages + first.pages)
        else:
            pieces.append(_Piece(prefix, "\n\n", False, heading_pages))
    return pieces


def _overlap_text(previous: list[_Piece], overlap: int) -> str:
    """The end of the previous chunk to repeat: whole trailing sentences, else a word-aligned tail."""
    if overlap <= 0 or not previous or not previous[-1].splittable:
        return ""
    taken: list[_Piece] = []
    size = 0
    for piece in reversed(previous):
        if not piece.splittable or size + text_size(piece.text) > overlap:
            break
        taken.insert(0, piece)
        size += text_size(piece.text)
        if piece.joiner:  # the start of a paragraph: do not reach into the one before
            break
    if taken:
        return "".join([taken[0].text] + [p.joiner + p.text for p in taken[1:]]).lstrip()
    last = previous[-1].text
    start = len(last) - _prefix_within(last[::-1], overlap)
    space = last.find(" ", start)
    if 0 <= space < len(last.rstrip()) - 1 and not _CJK.match(last[start]):
        start = space + 1
    return last[start:].lstrip()


def _make_chunk(index: int, path: tuple[str, ...], pieces: list[_Piece], overlap_text: str) -> Chunk:
    own = "".join([pieces[0].text] + [p.joiner + p.text for p in pieces[1:]])
    # Overlap from the same paragraph runs straight on; from an earlier one, after a blank line.
    sep = "" if pieces[0].joiner == "" else "\n\n"
    pages = tuple(sorted({p for piece in pieces for p in piece.pages}))
    if not overlap_text:
        return Chunk(index=index, heading_path=path, content=own.rstrip(), pages=pages)
    if sep:
        overlap_text = overlap_text.rstrip()
    return Chunk(
        index=index,
        heading_path=path,
        content=(overlap_text + sep + own).rstrip(),
        overlap_chars=len(overlap_text) + len(sep),
        pages=pages,
    )


def chunk_document(body: str, *, markdown: bool = True, target: int = 800, overlap: int = 100) -> list[Chunk]:
    """The document's chunks, in order. ``target``/``overlap`` are CJK-aware sizes."""
    if target < 50:
        raise ValueError("CHUNK_TARGET_CHARS must be at least 50")
    overlap = max(0, min(overlap, target // 2))
    chunks: list[Chunk] = []
    carried = ""
    sections = _sections(body, markdown=markdown)
    for position, section in enumerate(sections):
        if not section.blocks and position + 1 < len(sections):
            # A heading with nothing under it (a title above its first subsection) goes with the
            # next section's text instead of becoming a chunk of one line.
            carried = "\n\n".join(p for p in (carried, section.heading) if p)
            continue
        pieces = _section_pieces(section, carried, target)
        carried = ""
        current: list[_Piece] = []
        current_overlap = ""
        size = 0  # of the overlap and of each piece of ``current`` with its joiner, kept as it grows

        for piece in pieces:
            piece_size = text_size(piece.joiner + piece.text)
            if not current:
                current, size = [piece], text_size(current_overlap) + piece_size
                continue
            if size + piece_size <= target:
                current.append(piece)
                size += piece_size
                continue
            chunks.append(_make_chunk(len(chunks), section.path, current, current_overlap))
            current_overlap = _overlap_text(current, overlap)
            if current_overlap and text_size(current_overlap) + text_size(piece.text) + 2 > target:
                current_overlap = ""  # the overlap is a nicety; never let it push a chunk over
            current, size = [piece], text_size(current_overlap) + piece_size
        if current:
            chunks.append(_make_chunk(len(chunks), section.path, current, current_overlap))
    return chunks
