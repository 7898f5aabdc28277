"""The one analyser of the lexical index: the same tokens for what is indexed and what is asked.

``analyse(text)`` turns a chunk's text (or a query) into its tokens:

1. normalise: NFKC (``knowledge.lexical.nfkc``; full-width ``ＥＲＲ＿ＴＩＭＥＯＵＴ`` is ``err_timeout``),
   casefold, any run of whitespace one space, no NULs (``retrieval.lookup.keyword_index`` matches
   and the lookup's evidence compares text normalised by this same function);
2. ``script_fold``: one Chinese script. Traditional Chinese is folded to Simplified by OpenCC's
   ``t2s`` table (a Traditional question finds a Simplified document and the reverse; jieba's
   dictionary is Simplified). Measured on DRCD dev (Traditional) with a CMRC2018-fitted ranking:
   BM25 hit@1 0.922 unfolded, 0.937 folded. Documents are stored and shown as written: only the
   tokens are folded;
3. cut: Latin runs (letters, digits and ``_ . - /`` inside) stay whole, so ``err_quota_exceeded``,
   ``max_connections`` and ``java.lang.outofmemoryerror`` are one token each; everything else is
   cut by jieba (accurate mode, the dictionary it ships, ``knowledge.lexical.cutter``), as
   ``retrieval.lookup.query_terms.query_terms`` cuts a query;
4. keep words: tokens with a letter or digit, at most ``MAX_TOKEN_CHARS`` long (a base64 blob is
   no word anyone asks for). Question and function words are kept: the index counts what the text
   says, and which query words are worth asking for is the query side's choice.

The tokens contain no whitespace, so the tantivy index reads them back with a whitespace tokenizer.
``ANALYSER_SIGNATURE`` names everything that decides the tokens (this module's version, the cutter's,
the Unicode tables NFKC uses, the script folding); the lexical index stores it, and ``check_index``
reports an index built under another signature as needing ``reindex --lexical-only``.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from knowledge.lexical.cutter import cut, cutter_version
from knowledge.lexical.nfkc import nfkc

#: bump when a change here changes the tokens of some text
ANALYSER_VERSION = 2
MAX_TOKEN_CHARS = 100
#: the Chinese script folding in force (``script_fold``)
SCRIPT_FOLD = "opencc-t2s"

_SPACES = re.compile(r"\s+")
# The same Latin runs as retrieval.lookup.query_terms's query cutting (on casefolded text).
_LATIN_RUN = re.compile(r"([a-z0-9][a-z0-9_.\-/]*)")


def normalise(text: str) -> str:
    """NFKC, casefold, one space for any run of whitespace, no NULs, then ``script_fold``."""
    text = nfkc(text).casefold().replace("\x00", " ")
    return script_fold(_SPACES.sub(" ", text).strip())


def script_fold(text: str) -> str:
    """The one place Chinese text is brought to one script (Simplified) before it is cut or
    compared: the lexical index, L0 matching and the query all go through here."""
    if not text or text.isascii():
        return text
    return _converter().convert(text)


@functools.cache
def _converter():
    import opencc

    return opencc.OpenCC("t2s")


# A character for which str.isalnum() holds: Python's Unicode \w is exactly isalnum() or "_".
_ALNUM = re.compile(r"[^\W_]")


def analyse(text: str) -> list[str]:
    """The tokens of ``text``, in order, repeats kept (see the module docstring)."""
    tokens: list[str] = []
    keep = tokens.append
    # Split on the Latin runs (one capturing group): the odd pieces are the runs, kept whole;
    # the even ones are cut by jieba. Written for speed: indexing analyses every chunk.
    pieces = _LATIN_RUN.split(normalise(text))
    for i, piece in enumerate(pieces):
        if i % 2:
            word = piece.strip("._-/")  # starts with a letter or digit: never empty
            if len(word) <= MAX_TOKEN_CHARS:
                keep(word)
            continue
        if not piece or piece == " ":
            continue
        for token in cut(piece):
            # jieba hands whitespace back as tokens of its own; split defensively all the same
            for word in token.split() if " " in token else (token,):
                if len(word) <= MAX_TOKEN_CHARS and _ALNUM.search(word):
                    keep(word)
    return tokens


def analysed_text(text: str) -> str:
    """``analyse(text)`` joined by spaces: what the index's whitespace tokenizer reads."""
    return " ".join(analyse(text))


@functools.lru_cache(maxsize=1024)
def query_tokens(query: str) -> tuple[str, ...]:
    """A query's distinct tokens, in order of first appearance: what a lexical search asks for.

    Pass the query's key terms (``retrieval.lookup.query_terms.bm25_query_text``) or the raw query; terms
    already cut come back as they are (a space separates them, and a dictionary word alone is
    cut as itself)."""
    return tuple(dict.fromkeys(analyse(query)))


@functools.cache
def analyser_signature() -> str:
    """Everything that decides the tokens, as one string stored with the index."""
    import opencc

    return (
        f"agentkb-analyser/{ANALYSER_VERSION} {cutter_version()} unicode/{unicodedata.unidata_version}"
        f" fold/{SCRIPT_FOLD}-{getattr(opencc, '__version__', '1.4')} max/{MAX_TOKEN_CHARS}"
    )
