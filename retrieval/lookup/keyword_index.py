"""L0: exact keyword matching over the INDEXED documents' keywords, aliases and titles.

A document matches a query when one of its terms (``metadata["keywords"]``,
``metadata["aliases"]``, its title) occurs in the query, or the query occurs in one of its terms.
Both sides are normalised first (NFKC, so full-width ``ＥＲＲ＿ＴＩＭＥＯＵＴ`` equals
``ERR_TIMEOUT``; casefold; runs of whitespace as one space; Traditional Chinese folded to
Simplified). Terms under 2 characters are ignored.
A match must not cut an ASCII word in two (``api`` does not match inside ``rapid``); CJK text has
no word boundaries and matches anywhere.

Terms occurring in the query are found by one Aho-Corasick pass (pyahocorasick), linear in the
query whatever the number of keywords; the query occurring in a term is one ``str.find`` scan over
all terms joined into one string. The index is rebuilt when ``retrieval.lookup.corpus`` sees the corpus
change, so every process picks up uploads and deletes without a restart.
"""

from __future__ import annotations

import bisect
import functools
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import ahocorasick

from knowledge.lexical.analyser import normalise
from knowledge.selectors import documents_searchable
from retrieval.lookup.corpus import corpus_signature

MIN_TERM_CHARS = 2

# Both sides of a match, and the lexical evidence, normalise as the lexical index does: NFKC,
# casefold, one space for any run of whitespace, no NULs, Chinese folded to Simplified (a
# Traditional keyword matches a Simplified query and the reverse). Cached: a lookup normalises
# each of its candidates' texts twice (their coverage, then their level features) and its query
# several times; 256 texts hold a few lookups' worth.
text_normalise = functools.lru_cache(maxsize=256)(normalise)
# Separators people use inside one metadata string of several keywords.
_SPLIT = re.compile(r"[,，;；、\n]+")


def _is_word_char(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def _bounded(text: str, start: int, end: int) -> bool:
    """text[start:end] does not cut an ASCII word in two."""
    if start > 0 and _is_word_char(text[start]) and _is_word_char(text[start - 1]):
        return False
    return not (end < len(text) and _is_word_char(text[end - 1]) and _is_word_char(text[end]))


def document_terms(*, title: str, metadata: dict | None) -> list[str]:
    """The raw terms of a document: its keywords, aliases and title."""
    terms: list[str] = []
    metadata = metadata if isinstance(metadata, dict) else {}
    for key in ("keywords", "aliases"):
        value = metadata.get(key)
        if isinstance(value, str):
            terms.extend(_SPLIT.split(value))
        elif isinstance(value, list | tuple):
            terms.extend(str(v) for v in value if v is not None)
    if title:
        terms.append(title)
    return [t for t in (t.strip() for t in terms) if t]


@dataclass(frozen=True)
class IndexedDocument:
    doc_key: str
    title: str
    domain: str


@dataclass
class L0Match:
    doc_key: str
    title: str
    domain: str
    #: normalised terms that matched (in the query, or containing the query)
    terms: list[str] = field(default_factory=list)

    @property
    def longest(self) -> int:
        return max((len(t) for t in self.terms), default=0)


class KeywordIndex:
    """An immutable L0 index over a set of documents; build a new one to change it."""

    def __init__(self, documents: Iterable[tuple[IndexedDocument, list[str]]]) -> None:
        self.documents: list[IndexedDocument] = []
        term_docs: dict[str, list[int]] = {}
        for document, raw_terms in documents:
            index = len(self.documents)
            self.documents.append(document)
            for raw in raw_terms:
                term = text_normalise(raw)
                if len(term) < MIN_TERM_CHARS:
                    continue
                holders = term_docs.setdefault(term, [])
                if not holders or holders[-1] != index:
                    holders.append(index)
        # Longest first: the terms long enough to hold a query are then the haystack's head.
        self.terms: list[str] = sorted(term_docs, key=lambda t: (-len(t), t))
        self._term_docs: list[tuple[int, ...]] = [tuple(term_docs[t]) for t in self.terms]
        self._automaton = ahocorasick.Automaton()
        for term_id, term in enumerate(self.terms):
            self._automaton.add_word(term, term_id)
        if self.terms:
            self._automaton.make_automaton()
        # Every term in one string for the reverse direction (query inside a term).
        self._haystack = "\x00".join(self.terms)
        self._starts: list[int] = []
        offset = 0
        for term in self.terms:
            self._starts.append(offset)
            offset += len(term) + 1
        self._negative_lengths = [-len(term) for term in self.terms]  # ascending, for bisect

    def __len__(self) -> int:
        return len(self.documents)

    @property
    def term_count(self) -> int:
        return len(self.terms)

    def _matched_term_ids(self, query: str) -> set[int]:
        found: set[int] = set()
        if not self.terms:
            return found
        # Terms occurring in the query.
        for end, term_id in self._automaton.iter(query):
            term = self.terms[term_id]
            if _bounded(query, end - len(term) + 1, end + 1):
                found.add(term_id)
        # The query occurring in a term: only in the terms at least as long as the query, the
        # haystack's head (a question is longer than most keywords; scanning every term cost
        # 0.5 ms a lookup at 100,000 documents).
        longer = bisect.bisect_right(self._negative_lengths, -len(query))
        if not longer:
            return found
        hay, starts = self._haystack, self._starts
        end = starts[longer - 1] + len(self.terms[longer - 1])
        pos = hay.find(query, 0, end)
        while pos != -1:
            term_id = bisect.bisect_right(starts, pos) - 1
            term = self.terms[term_id]
            rel = pos - starts[term_id]
            if _bounded(term, rel, rel + len(query)):
                found.add(term_id)
                pos = hay.find(query, starts[term_id] + len(term) + 1, end)
            else:
                pos = hay.find(query, pos + 1, end)
        return found

    def match(self, query: str) -> list[L0Match]:
        """The distinct documents matching ``query``: longest matched term first, then title."""
        normalised = text_normalise(query)
        if len(normalised) < MIN_TERM_CHARS:
            return []
        by_doc: dict[int, L0Match] = {}
        for term_id in self._matched_term_ids(normalised):
            term = self.terms[term_id]
            for doc_index in self._term_docs[term_id]:
                document = self.documents[doc_index]
                match = by_doc.get(doc_index)
                if match is None:
                    match = by_doc[doc_index] = L0Match(document.doc_key, document.title, document.domain)
                match.terms.append(term)
        matches = list(by_doc.values())
        for match in matches:
            match.terms.sort(key=lambda t: (-len(t), t))
        matches.sort(key=lambda m: (-m.longest, m.title, m.doc_key))
        return matches


def keyword_index_build() -> KeywordIndex:
    """A fresh index over the documents INDEXED now."""
    rows = documents_searchable().order_by("id").values_list("doc_key", "title", "domain", "metadata")
    return KeywordIndex(
        (IndexedDocument(doc_key, title, domain), document_terms(title=title, metadata=metadata))
        for doc_key, title, domain, metadata in rows.iterator(chunk_size=2000)
    )


class _Holder:
    def __init__(self) -> None:
        self.index: KeywordIndex | None = None
        self.signature: tuple | None = None
        self.lock = threading.Lock()


_holder = _Holder()


def keyword_index_get(*, signature: tuple | None = None) -> KeywordIndex:
    """The process's L0 index, rebuilt when the corpus signature moved (pass ``signature`` when
    the caller already read it).

    While one thread rebuilds, the others keep answering from the previous index rather than
    queueing behind the rebuild; only the very first build makes callers wait.
    """
    signature = corpus_signature() if signature is None else signature
    holder = _holder
    if holder.index is not None and holder.signature == signature:
        return holder.index
    blocking = holder.index is None
    if not holder.lock.acquire(blocking=blocking):
        return holder.index  # type: ignore[return-value]  # not None: non-blocking only then
    try:
        if holder.index is None or holder.signature != signature:
            index = keyword_index_build()
            holder.index, holder.signature = index, signature
        return holder.index
    finally:
        holder.lock.release()


def keyword_index_forget() -> None:
    """Drop the process's index (tests)."""
    with _holder.lock:
        _holder.index, _holder.signature = None, None
