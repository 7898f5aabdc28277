"""Lexical evidence: how much of what a query is about a candidate's text actually contains.

``lexical_evidence(terms, text)`` compares the query's weighted terms (``retrieval.lookup.
query_terms``) with ``text`` (normalised as the keyword index normalises: NFKC, casefold): the
weighted share of the terms found, 0..1. A high share on the best candidate is evidence the
question is about it; a low share says the question's key terms are absent, which a dense
similarity alone cannot tell (on CMRC2018 the USE model gives unanswerable questions the same
similarities as answerable ones).

Scripts: an English question on a Chinese document shares no words with it by nature. So a
document is compared with the query's terms written in its own main script (``main_script``) plus
the identifiers, which are spelt the same in every language. Query and document in one script:
every term counts and the evidence may raise or lower a level. Different scripts: only when those
comparable terms carry at least a third of the query's weight (a Chinese question naming
``maxUnavailable``, an English question quoting a Chinese runbook's error text), and then the
evidence may raise a level, never lower it: what the query says in the other language cannot be
looked for. Otherwise there is no lexical evidence (``None``) and the level rests on the dense
similarity alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval.lookup.keyword_index import text_normalise
from retrieval.lookup.query_terms import _CJK, _LATIN_WORD, QueryTerms, Term


@dataclass(frozen=True)
class Evidence:
    """What a document's text says of a query's terms (``lexical_evidence``)."""

    #: the weighted share of the comparable terms found in the text, 0..1
    coverage: float
    #: query and text written in one script: the evidence may lower a level too
    same_script: bool


# Runs, not characters: counting the characters of a few runs is a fraction of the cost of a list
# of every character (the lookup asks it of each of its candidates' texts).
_LATIN_RUN = re.compile(r"[a-z]+")
_CJK_RUN = re.compile(f"{_CJK.pattern}+")
# One CJK character carries about as much as a few Latin letters: a text is CJK when its CJK
# characters are at least a third as many as its Latin letters.
_LATIN_PER_CJK = 3


def main_script(text: str) -> str | None:
    """ "cjk" or "latin": the script most of ``text`` (already normalised) is written in."""
    cjk = sum(map(len, _CJK_RUN.findall(text)))
    latin = sum(map(len, _LATIN_RUN.findall(text)))
    if not cjk and not latin:
        return None
    return "cjk" if cjk * _LATIN_PER_CJK >= latin else "latin"


# Across scripts, the terms a document can be compared with must carry this share of the query.
CROSS_SCRIPT_MIN_SHARE = 1 / 3


def lexical_evidence(terms: tuple[Term, ...], text: str, *, query_script: str | None) -> Evidence | None:
    """What ``text`` says of ``terms`` (see the module docstring); None without evidence."""
    total = sum(t.weight for t in terms)
    if not terms or total <= 0 or query_script is None:
        return None
    normalised = text_normalise(text)
    text_script = main_script(normalised)
    if text_script == query_script:
        comparable = terms
    else:
        quoted = _quoted_latin_words(terms, normalised)
        comparable = tuple(
            t for t in terms if t.identifier or t.text in quoted or (t.script and t.script == text_script)
        )
        if sum(t.weight for t in comparable) < CROSS_SCRIPT_MIN_SHARE * total:
            return None
    weight = sum(t.weight for t in comparable)
    found = sum(t.weight for t in comparable if t.text in normalised)
    return Evidence(found / weight, same_script=text_script == query_script)


# Three words in a row, verbatim, are a quotation rather than a coincidence.
QUOTE_MIN_WORDS = 3


def _quoted_latin_words(terms: tuple[Term, ...], normalised_text: str) -> frozenset[str]:
    """The query's Latin words that ``normalised_text`` quotes: those inside a run of
    ``QUOTE_MIN_WORDS`` consecutive query words found verbatim in it (punctuation aside). A Chinese
    runbook quoting "Connection is not available, request timed out" is compared with an English
    question pasting that error, although the two are written in different scripts."""
    query_words = _query_latin_words(terms)
    if len(query_words) < QUOTE_MIN_WORDS:
        return frozenset()
    text_words = " " + " ".join(_LATIN_WORD.findall(normalised_text)) + " "
    quoted: set[str] = set()
    for i in range(len(query_words) - QUOTE_MIN_WORDS + 1):
        window = query_words[i : i + QUOTE_MIN_WORDS]
        if f" {' '.join(window)} " in text_words:
            quoted.update(window)
    return frozenset(quoted)


def _query_latin_words(terms: tuple[Term, ...]) -> tuple[str, ...]:
    return terms.latin_words if isinstance(terms, QueryTerms) else ()
