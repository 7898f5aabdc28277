"""The evidence the level model reads (``retrieval.lookup.level_model``), one dict per candidate.

Only evidence that kept its meaning from CMRC2018 to DRCD (a Simplified and a Traditional set of
different sizes) is used; raw cosine, equal-weight RRF scores and "L0 matched" did not transfer:

- ``cos_margin``: the candidate's FS-1 similarity minus the best other candidate's;
- ``bm25_margin``: its best chunk's BM25 score minus the best other's, over the larger of the
  two, so it does not grow with the corpus or the query's length; ``bm25_seen``: BM25 found it;
- ``coverage`` / ``cov_margin``: the weighted share of the query's terms its text holds
  (``retrieval.lookup.lexical``) and the same against the best other candidate;
- ``entity_share``: the share of the query's entities (numbers, codes, Latin-script tokens,
  names) found whole in its text: "2号线" is absent from a text about "12号线", a station name
  that differs by one character is absent although its characters occur; ``has_entities``;
- ``lcs`` / ``lcs_margin``: the longest run of the query found verbatim in its text, as a share of
  the query's letters and digits, and the same against the best other candidate. A question
  written from a passage, or an error message pasted from a log, repeats a run of it; a sibling
  passage on the same topic holds the query's words scattered. It is a share of the query, so it
  does not grow with the corpus or the query's length.

Beside them each candidate's dict holds ``identifiers_absent``, which the model does not read: how
many of the query's identifiers (``query_identifiers``) its text lacks as whole words. An
identifier names one thing; a text without it is not the answer, whatever the margins say
(``retrieval.lookup.evidence.estimate_capped`` holds its estimate below REFERENCE). "What is the
Python GIL?" found a payment runbook with a Python sample at 0.994: "python" was that document's
word alone, a BM25 margin of 1. Of the CMRC 2018 trial and DRCD dev questions, 66 name an
identifier and 3 miss it in their own paragraph, all three fractions (1/3 written out), which are
numbers here, not identifiers.

Measured with ``bench/quality.py --from-collected`` (docs/lookup.md, the variants table): BM25 over
its upper bound with the query's IDF, a BM25 of the text with the language's IDF, whole-word and
rarest-term coverage, the best sentence's coverage and the raw cosine did not raise both hit@1 and
not-found on the set the model was not fitted on; the verbatim run did.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from retrieval.lookup.keyword_index import text_normalise
from retrieval.lookup.query_terms import CAMEL_CASE, has_separator, query_terms

FEATURES = (
    "cos_margin",
    "bm25_margin",
    "bm25_seen",
    "coverage",
    "cov_margin",
    "entity_share",
    "has_entities",
    "lcs",
    "lcs_margin",
)
#: not a model feature: the count of the query's identifiers the candidate's text lacks
IDENTIFIERS_ABSENT = "identifiers_absent"
NEUTRAL_COVERAGE = 0.5
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_LATIN = re.compile(r"[a-z][a-z0-9_\-]*[a-z0-9]|[a-z]{2,}")
_NAME_FLAGS = ("nr", "ns", "nt", "nz")


@dataclass(frozen=True)
class Entity:
    text: str
    kind: str  # "number", "latin" or "name"

    def found_in(self, normalised_text: str) -> bool:
        """Found whole: a number not inside a longer number, a Latin token not inside a word."""
        if self.kind == "name":
            return self.text in normalised_text
        edge = r"\d" if self.kind == "number" else r"[a-z0-9_]"
        return re.search(rf"(?<!{edge}){re.escape(self.text)}(?!{edge})", normalised_text) is not None


@functools.lru_cache(maxsize=1024)
def query_entities(query: str) -> tuple[Entity, ...]:
    """The query's numbers, codes, Latin-script tokens and names (jieba's part-of-speech tags
    nr / ns / nt / nz), in the folded script."""
    normalised = text_normalise(query)
    found: dict[str, Entity] = {}
    for match in _NUMBER.findall(normalised):
        found.setdefault(match, Entity(match, "number"))
    for match in _LATIN.findall(normalised):
        found.setdefault(match, Entity(match, "latin"))
    for word, flag in _posseg(normalised):
        if len(word) >= 2 and flag in _NAME_FLAGS and not word.isascii():
            found.setdefault(word, Entity(word, "name"))
    return tuple(found.values())


@functools.lru_cache(maxsize=1024)
def query_identifiers(query: str) -> tuple[Entity, ...]:
    """The query's identifiers that name one thing, each to be found as a whole word: a code or
    setting name with a separator inside (``ERR_QUOTA_EXCEEDED``, ``max_connections``,
    ``java.lang.OutOfMemoryError``), or a name written in capitals or camel case with at least
    three letters (``GIL``, ``HikariCP``). Not every ``Term.identifier``: numbers ("1/3" is written
    三分之一 as often; ``entity_share`` weighs them), and short or lower-case mixes of letters and
    digits ("k8s", "v2", a hex id) are abbreviations or noise as often as names."""
    named = {m.casefold() for m in CAMEL_CASE.findall(query) if sum(ch.isalpha() for ch in m) >= 3}
    return tuple(
        Entity(t.text, "latin")
        for t in query_terms(query)
        if t.identifier and any(ch.isalpha() for ch in t.text) and (has_separator(t.text) or t.text in named)
    )


def _posseg(text: str) -> list[tuple[str, str]]:
    import jieba.posseg

    return [(p.word, p.flag) for p in jieba.posseg.lcut(text)]


def entity_share(entities: Iterable[Entity], normalised_text: str) -> float | None:
    entities = tuple(entities)
    if not entities:
        return None
    return sum(1 for e in entities if e.found_in(normalised_text)) / len(entities)


def longest_common_share(normalised_query: str, normalised_text: str) -> float:
    """The longest run of the query found verbatim in the text (both normalised as
    ``text_normalise`` does), as a share of the query's letters and digits: punctuation and spaces
    inside the run are not counted, nor in the query."""
    letters = sum(1 for ch in normalised_query if ch.isalnum())
    if not letters or not normalised_text:
        return 0.0
    best, run = 0, ""
    for start in range(len(normalised_query)):
        # only a run longer than the best so far is worth looking for
        while (
            start + best < len(normalised_query)
            and normalised_query[start : start + best + 1] in normalised_text
        ):
            best += 1
            run = normalised_query[start : start + best]
    return min(1.0, sum(1 for ch in run if ch.isalnum()) / letters)


@dataclass(frozen=True)
class CandidateSignals:
    """What the lookup knows of one candidate before its level is decided."""

    doc_key: str
    similarity: float | None
    bm25: float | None
    coverage: float | None
    text: str


def features_compute(query: str, signals: list[CandidateSignals]) -> dict[str, dict[str, float]]:
    """Each candidate's features (see the module docstring), by doc key."""
    entities = query_entities(query) if any(s.text for s in signals) else ()
    identifiers = query_identifiers(query) if any(s.text for s in signals) else ()
    texts = {s.doc_key: text_normalise(s.text) if s.text else "" for s in signals}
    query_normalised = text_normalise(query)
    runs = {key: longest_common_share(query_normalised, text) for key, text in texts.items()}
    out: dict[str, dict[str, float]] = {}
    for s in signals:
        others = [o for o in signals if o.doc_key != s.doc_key]
        sim = s.similarity if s.similarity is not None else 0.0
        sim_other = max((o.similarity for o in others if o.similarity is not None), default=0.0)
        bm = s.bm25 if s.bm25 is not None else 0.0
        bm_other = max((o.bm25 for o in others if o.bm25 is not None), default=0.0)
        cov = s.coverage if s.coverage is not None else NEUTRAL_COVERAGE
        cov_other = max((o.coverage for o in others if o.coverage is not None), default=0.0)
        share = entity_share(entities, texts[s.doc_key]) if s.text else None
        run_other = max((runs[o.doc_key] for o in others), default=0.0)
        out[s.doc_key] = {
            "cos_margin": sim - sim_other,
            "bm25_margin": (bm - bm_other) / max(bm, bm_other, 1e-9),
            "bm25_seen": 1.0 if s.bm25 is not None else 0.0,
            "coverage": cov,
            "cov_margin": cov - cov_other,
            "entity_share": 1.0 if share is None else share,
            "has_entities": 1.0 if entities else 0.0,
            "lcs": runs[s.doc_key],
            "lcs_margin": runs[s.doc_key] - run_other,
            IDENTIFIERS_ABSENT: float(sum(1 for e in identifiers if not e.found_in(texts[s.doc_key])))
            if s.text
            else 0.0,
        }
    return out
