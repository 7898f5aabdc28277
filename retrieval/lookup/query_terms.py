"""The query's weighted terms: which words of a query say what it is about, and how much each.

``query_terms(query)`` cuts the query into words as the lexical index cuts text (jieba,
``knowledge.lexical.cutter``) and weighs each by its inverse document frequency in jieba's
general-language table (the one ``jieba.analyse`` ships): "什么", "how" and the like weigh
little, names and rare words much.
The table belongs to the language, not to this corpus, so a term's weight means the same in
every knowledge base and is known without reading the corpus. Words the table does not know
(product names, error codes, English) get its median, as jieba's own keyword extraction does.

Latin words get their weight from English word frequencies (wordfreq: ``-ln frequency``, capped
at the table's largest IDF) instead of jieba's median: the table knows few English words, and the
median weighed "comes" like "forbidden". Identifiers (``ERR_FORBIDDEN``, ``max_connections``,
``maxUnavailable``, ``3000ms``) weigh the most: they name one thing, in every language.

What a document's text says of these terms is ``retrieval.lookup.lexical``.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import statistics
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knowledge.lexical.cutter import cut
from retrieval.lookup.keyword_index import text_normalise

# Function words jieba's table weighs as content (it has few English entries); questions are
# full of them.
_STOP_WORDS = frozenset(
    """
    a an and are as at be by can could do does for from had has have how i if in is it its me my of
    on or our should so that the their there these this to was we were what when where which who
    whom why will with would you your mean get use
    """.split()  # noqa: SIM905 - a word list reads better as words
)

# Interrogatives and function words of Chinese questions: they say what is asked, not what about,
# and jieba's table weighs several of them like content words (哪里, 多少, 为什么).
_STOP_WORDS_ZH = frozenset(
    """
    的 了 是 在 于 为 和 与 及 或 等 有 被 把 对 从 到 由 以 之 其 该 此 这 那 这个 那个 吗 呢 吧 啊 什么 哪 哪里 哪儿 哪些 哪个 哪一 哪一年 哪一种 谁
    多少 几 几个 几种 多 多大 多长 多久 怎么 怎样 怎么样 如何 为什么 为何 何 何时 何地 是否 是不是 能否 可以 应该 需要 要 会 能 还 也 都 就
    """.split()  # noqa: SIM905 - a word list reads better as words
)


@dataclass(frozen=True)
class Term:
    text: str
    weight: float
    #: "cjk" or "latin": the script the term is written in
    script: str | None = None
    #: spelt the same in every language (an error code, a setting name): comparable with any text
    identifier: bool = False


class QueryTerms(tuple):
    """The query's terms (a tuple of ``Term``), and its Latin words in order, stop words included
    ("is not available"): what a quotation is looked for with."""

    latin_words: tuple[str, ...]

    def __new__(cls, terms: Iterable[Term], latin_words: Iterable[str] = ()) -> QueryTerms:
        self = super().__new__(cls, terms)
        self.latin_words = tuple(latin_words)
        return self


class _Idf:
    def __init__(self) -> None:
        self.table: dict[str, float] = {}
        self.median = 0.0
        self.max = 0.0
        self.english: Any = None  # wordfreq.word_frequency, imported by load()
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
            self.max = max(table.values())
            from wordfreq import word_frequency

            self.english = word_frequency
            jieba.initialize()
            self.loaded = True


_idf = _Idf()


def _is_word(token: str) -> bool:
    return any(ch.isalnum() for ch in token)


@functools.lru_cache(maxsize=1024)
def query_terms(query: str) -> QueryTerms:
    """The query's distinct words with their weights (see the module docstring). Cached: the
    lookup asks twice (the BM25 request, then the evidence)."""
    _idf.load()
    seen: dict[str, Term] = {}
    tokens: list[str] = []
    # Latin runs stay whole (ERR_QUOTA_EXCEEDED, max_connections, java.lang.OutOfMemoryError):
    # jieba would cut them at each underscore into words every error code shares.
    for piece in _LATIN_RUN.split(text_normalise(query)):
        if _LATIN_RUN.fullmatch(piece):
            tokens.append(piece.strip("._-/"))
        elif piece.strip():
            tokens.extend(cut(piece))
    camel = {m.casefold() for m in CAMEL_CASE.findall(query)}
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
        if _CJK.search(token):
            seen[token] = Term(token, _idf.table.get(token, _idf.median), "cjk")
        elif _is_identifier(token) or token in camel:
            seen[token] = Term(token, _idf.max, "latin", identifier=True)
        else:
            seen[token] = Term(token, _latin_weight(token), "latin")
    return QueryTerms(seen.values(), _LATIN_WORD.findall(text_normalise(query)))


def bm25_query_text(query: str) -> str:
    """What the BM25 request searches for: the query's terms without its question and function
    words. Milvus's analyzer would keep "的", "什么", "how": each adds nothing to the ranking (its
    IDF is near zero) but costs a walk over a posting list as long as the corpus, which milvus-lite
    does in Python. Empty when the query has no term."""
    return " ".join(t.text for t in query_terms(query))


def has_separator(token: str) -> bool:
    """``_ . / -`` inside the token (not at its ends): ``err_timeout``, ``java.lang.x``, ``1/3``."""
    return any(ch in "_./-" for ch in token.strip("._-/"))


def _is_identifier(token: str) -> bool:
    """An error code, a setting or a metric name: a separator inside, or letters and digits."""
    inner = token.strip("._-/")
    return has_separator(token) or (any(ch.isdigit() for ch in inner) and any(ch.isalpha() for ch in inner))


def _latin_weight(word: str) -> float:
    """``-ln`` of the word's English frequency, capped at the IDF table's largest value (which a
    word English does not know gets: a product name, a code)."""
    frequency = _idf.english(word, "en")
    return min(-math.log(frequency), _idf.max) if frequency > 0 else _idf.max


_LATIN_RUN = re.compile(r"([a-z0-9][a-z0-9_.\-/]*)")
# maxUnavailable, HikariCP, OutOfMemoryError: read from the query before it is case-folded.
CAMEL_CASE = re.compile(r"\b[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*\b")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LATIN_WORD = re.compile(r"[a-z0-9][a-z0-9_]*")
