"""What the agent reads: the documents' text for primary / supplement, and the message.

The agent body never carries a score, a similarity or a distance (FS-4): raw numbers go to
``retrieval_details`` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.models import ApiDocument, DocumentChunk
from retrieval.agents import texts as agent_texts
from retrieval.lookup.keyword_index import text_normalise
from retrieval.lookup.normalisation import RelevanceLevel
from retrieval.lookup.ranking import Candidate, Selection


@dataclass(frozen=True)
class DocumentRow:
    id: int
    doc_key: str
    title: str
    domain: str
    content_len: int


@dataclass(frozen=True)
class _Chunk:
    index: int
    heading_path: str
    content: str
    pages: str = ""


def _chosen_chunk(candidate: Candidate, chunks: dict[int, _Chunk]) -> _Chunk | None:
    """The chunk to show: for an L0 document, one that contains a matched keyword (the L1 best
    chunk if it does); otherwise the best L1 chunk; else the first chunk."""
    if candidate.via_l0 and chunks:
        containing = [
            c for c in chunks.values() if any(t in text_normalise(c.content) for t in candidate.l0_terms)
        ]
        if containing:
            for c in containing:
                if c.index == candidate.chunk_index:
                    return c
            return min(containing, key=lambda c: c.index)
    if candidate.chunk_index is not None and candidate.chunk_index in chunks:
        return chunks[candidate.chunk_index]
    return chunks[min(chunks)] if chunks else None


def _window(
    chunks: dict[int, _Chunk], around: int, max_chars: int, skip: frozenset[int] = frozenset()
) -> tuple[str, frozenset[int]]:
    """Chunks nearest ``around`` (it first), in document order, up to ``max_chars``, leaving out
    ``skip`` (chunks the session already has); the text and the chunks it carries."""
    picked: list[int] = []
    total = 0
    for index in sorted(chunks, key=lambda i: (abs(i - around), i)):
        if index in skip and index != around:
            continue
        size = len(chunks[index].content)
        if picked and total + size > max_chars:
            continue
        picked.append(index)
        total += size
    text = "\n\n".join(chunks[i].content for i in sorted(picked))
    return text[:max_chars], frozenset(picked)


@dataclass(frozen=True)
class ResultItems:
    """The agent-facing items, primary first, and what each carries of its document: None for
    the whole document, else its chunk indexes (what the action memory records as sent)."""

    items: list[dict]
    carried: list[frozenset[int] | None]


def result_items_build(
    *,
    returned: list[Candidate],
    documents: dict[str, DocumentRow],
    content_max_chars: int,
    held: dict[str, frozenset[int]] | None = None,
) -> ResultItems:
    """One agent-facing item per returned document, primary first.

    The primary carries its whole document when it fits ``content_max_chars`` (the session is
    marked as having the document, so the agent should really have it), else the chunks around
    the matched one; a supplement carries its matched chunk. ``held``: documents of which the
    session already has some chunks: a primary among them carries the chunks around the match
    it does not have yet, not the whole document again.
    """
    held = held or {}
    if not returned:
        return ResultItems([], [])
    primary = returned[0]
    primary_doc = documents[primary.doc_key]
    primary_whole = primary_doc.content_len <= content_max_chars and primary.doc_key not in held
    chunks_by_doc = _chunks_read(returned, documents, primary_doc.id, primary_whole)
    primary_content = None
    if primary_whole:
        primary_content = (
            ApiDocument.objects.filter(pk=primary_doc.id).values_list("content", flat=True).first() or ""
        )
    items = []
    carried: list[frozenset[int] | None] = []
    for position, candidate in enumerate(returned):
        document = documents[candidate.doc_key]
        chunks = chunks_by_doc.get(document.id, {})
        chunk = _chosen_chunk(candidate, chunks)
        if position == 0 and primary_content is not None:
            content, parts = primary_content, None
        elif position == 0 and chunk is not None:
            content, parts = _window(
                chunks, chunk.index, content_max_chars, held.get(document.doc_key, frozenset())
            )
        elif chunk is not None:
            content, parts = chunk.content[:content_max_chars], frozenset({chunk.index})
        else:
            content, parts = "", None
        carried.append(parts)
        items.append(_item(document, chunk, content))
    return ResultItems(items, carried)


def _chunks_read(
    returned: list[Candidate], documents: dict[str, DocumentRow], primary_id: int, primary_whole: bool
) -> dict[int, dict[int, _Chunk]]:
    """The chunks the items need, by document id and chunk index, in two queries."""
    # Documents whose every chunk we read: L0 documents (to find the keyword) and a primary
    # too long to send whole (for the window); the others need their one best chunk. Both
    # queries below are answered from the (document_id, chunk_index) unique index.
    full_ids = {documents[c.doc_key].id for c in returned if c.via_l0 or c.chunk_index is None}
    if not primary_whole:
        full_ids.add(primary_id)
    wanted = {
        (documents[c.doc_key].id, c.chunk_index) for c in returned if documents[c.doc_key].id not in full_ids
    }
    fields = ("document_id", "chunk_index", "heading_path", "content", "pages")
    rows: list[tuple] = []
    if full_ids:
        rows += DocumentChunk.objects.filter(document_id__in=full_ids).values_list(*fields)
    if wanted:
        candidates = DocumentChunk.objects.filter(
            document_id__in={d for d, _ in wanted}, chunk_index__in={i for _, i in wanted}
        ).values_list(*fields)
        rows += [row for row in candidates if (row[0], row[1]) in wanted]
    chunks_by_doc: dict[int, dict[int, _Chunk]] = {}
    for document_id, index, heading_path, content, pages in rows:
        chunks_by_doc.setdefault(document_id, {})[index] = _Chunk(index, heading_path, content, pages)
    return chunks_by_doc


def _item(document: DocumentRow, chunk: _Chunk | None, content: str) -> dict:
    """What the agent gets of one document."""
    item = {
        "title": document.title,
        "domain": document.domain,
        "docKey": document.doc_key,
        "headingPath": chunk.heading_path if chunk else "",
        "content": content,
    }
    if chunk is not None and chunk.pages:
        item["pages"] = chunk.pages  # PDF pages / slides the chunk comes from: a citation
    return item


def _titles(candidates: list[Candidate], language: str | None = None) -> str:
    return agent_texts.titles([c.title or c.doc_key for c in candidates], language)


def message_build(
    *,
    selection: Selection,
    domains_before: list[str],
    held_in_blocked_domain: list[str],
    domain_dedup: str,
    degraded: bool,
    vector_search_down: bool = False,
    language: str | None = None,
) -> str:
    """The agent-facing message, in the agent's language (retrieval.agents.texts)."""
    t = agent_texts.text
    parts: list[str] = []
    if selection.level == RelevanceLevel.DEDUPED and selection.blocked_domain:
        held = agent_texts.listing(held_in_blocked_domain[:5], language) or t("held_fallback", language)
        parts.append(t("blocked_domain", language, domain=selection.blocked_domain, held=held))
    elif selection.level == RelevanceLevel.DEDUPED:
        domains = agent_texts.listing(dict.fromkeys(c.domain for c in selection.withheld), language)
        parts.append(
            t("all_deduped", language, titles=_titles(selection.withheld, language), domains=domains)
        )
    elif not selection.found:
        parts.append(t("not_found", language))
    else:
        primary = selection.returned[0]
        title = t("title", language, title=primary.title or primary.doc_key)
        text = t("found", language, count=len(selection.returned), title=title, domain=primary.domain)
        if len(selection.returned) > 1:
            text += t("found_supplements", language, count=len(selection.returned) - 1)
        parts.append(text + t("found_end", language))
        if selection.withheld:
            parts.append(t("withheld", language, titles=_titles(selection.withheld, language)))
        repeated = [d for d in dict.fromkeys(c.domain for c in selection.returned) if d in domains_before]
        if domain_dedup == "soft" and repeated:
            parts.append(t("domain_repeated", language, domains=agent_texts.listing(repeated, language)))
    if vector_search_down:
        # Agents read this: say which part is missing so they can judge a "not found".
        parts.append(t("vector_search_down", language))
    elif degraded:
        parts.append(t("degraded", language))
    return agent_texts.joined(parts, language)
