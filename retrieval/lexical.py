"""Lexical evidence: how much of what a query is about a candidate's text actually contains.

``query_terms(query)`` cuts the query into words with jieba (the analyzer Milvus's BM25 uses) and
weighs each by its inverse document frequency in jieba's general-language table (the one
``jieba.analyse`` ships): "什么", "how" and the like weigh little, names and rare words much.
The table belongs to the language, not to this corpus, so a term's weight means the same in
every knowledge base and is known without reading the corpus. Words the table does not know
(product names, error codes, English) get its median, as jieba's own keyword extraction does.

``term_coverage(terms, text)`` is the weighted share of the terms found in ``text`` (normalised as
the keyword index normalises: NFKC, casefold), 0..1. A high share on the best candidate is
evidence the question is about it; a low share says the question's key terms are absent, which a
dense similarity alone cannot tell (on CMRC2018 the USE model gives unanswerable questions the
same similarities as answerable ones).

Query and text are compared only when both are written mostly in one script (``main_script``):
an English question on a Chinese document shares no words with it by nature, so there is no
lexical evidence either way (``None``) and the level rests on the dense similarity alone.
"""

from __future__ import annotations

import logging
import re
import statistics
import threading
from dataclasses import dataclass
from pathlib import Path

from retrieval.keyword_index import text_normalise

logger = logging.getLogger(__name__)

# Function words jieba's table weighs as content (it has few English entries); questions are
# full of them.
_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "mean",
        "get",
        "use",
    ]
)


# Interrogatives and function words of Chinese questions: they say what is asked, not what about,
# and jieba's table weighs several of them like content words (哪里, 多少, 为什么).
_STOP_WORDS_ZH = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "于",
        "为",
        "和",
        "与",
        "及",
        "或",
        "等",
        "有",
        "被",
        "把",
        "对",
        "从",
        "到",
        "由",
        "以",
        "之",
        "其",
        "该",
        "此",
        "这",
        "那",
        "这个",
        "那个",
        "吗",
        "呢",
        "吧",
        "啊",
        "什么",
        "哪",
        "哪里",
        "哪儿",
        "哪些",
        "哪个",
        "哪一",
        "哪一年",
        "哪一种",
        "谁",
        "多少",
        "几",
        "几个",
        "几种",
        "多",
        "多大",
        "多长",
        "多久",
        "怎么",
        "怎样",
        "怎么样",
        "如何",
        "为什么",
        "为何",
        "何",
        "何时",
        "何地",
        "是否",
        "是不是",
        "能否",
        "可以",
        "应该",
        "需要",
        "要",
        "会",
        "能",
        "还",
        "也",
        "都",
        "就",
    ]
)


@dataclass(frozen=True)
class Term:
    text: str
    weight: float


class _Idf:
    def __init__(self) -> None:
        self.table: dict[str, float] = {}
        self.median = 0.0
        self.loaded = False
        self.lock = threading.Lock()

    def load(self) -> None:
        with self.lock:
            if self.loaded:
                return
            import jieba
            import jieba.analyse  # the package holding idf.txt

            jieba.setLogLevel(logging.WARNING)
            path = Path(jieba.analyse.__file__).parent / "idf.txt"
            table: dict[str, float] = {}
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    word, _, value = line.strip().partition(" ")
                    if value:
                        table[word] = float(value)
            self.table = table
            self.median = statistics.median(table.values())
            jieba.initialize()
            self.loaded = True


_idf = _Idf()


def lexical_warm_up() -> None:
    """Load jieba's dictionary and IDF table now (about a second) rather than on a first lookup."""
    _idf.load()


def _is_word(token: str) -> bool:
    return any(ch.isalnum() for ch in token)


def query_terms(query: str) -> tuple[Term, ...]:
    """The query's distinct words with their weights (see the module docstring)."""
    _idf.load()
    import jieba

    seen: dict[str, Term] = {}
    tokens: list[str] = []
    # Latin runs stay whole (ERR_QUOTA_EXCEEDED, max_connections, java.lang.OutOfMemoryError):
    # jieba would cut them at each underscore into words every error code shares.
    for piece in _LATIN_RUN.split(text_normalise(query)):
        if _LATIN_RUN.fullmatch(piece):
            tokens.append(piece.strip("._-/"))
        elif piece.strip():
            tokens.extend(jieba.lcut(piece))
    for token in tokens:
        token = token.strip()
        if (
            not token
            or not _is_word(token)
            or token in _STOP_WORDS
            or token in _STOP_WORDS_ZH
            or token in seen
        ):
            continue
        if token.isascii() and len(token) < 2:  # "4", "a": in every text
            continue
        weight = _idf.table.get(token, _idf.median)
        seen[token] = Term(token, weight)
    return tuple(seen.values())


_LATIN_RUN = re.compile(r"([a-z0-9][a-z0-9_.\-/]*)")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LATIN = re.compile(r"[a-z]")
# One CJK character carries about as much as a few Latin letters: a text is CJK when its CJK
# characters are at least a third as many as its Latin letters.
_LATIN_PER_CJK = 3


def main_script(text: str) -> str | None:
    """ "cjk" or "latin": the script most of ``text`` (already normalised) is written in."""
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN.findall(text))
    if not cjk and not latin:
        return None
    return "cjk" if cjk * _LATIN_PER_CJK >= latin else "latin"


def term_coverage(terms: tuple[Term, ...], text: str, *, query_script: str | None) -> float | None:
    """The weighted share of ``terms`` found in ``text``; None when the query and the text are
    written in different scripts (a translation shares no words with its original)."""
    total = sum(t.weight for t in terms)
    if not terms or total <= 0:
        return None
    normalised = text_normalise(text)
    if query_script is None or main_script(normalised) != query_script:
        return None
    found = sum(t.weight for t in terms if t.text in normalised)
    return found / total
