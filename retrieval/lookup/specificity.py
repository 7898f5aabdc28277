"""Whether an L0 keyword is specific enough for PRECISE (the model's rule, issue "PRECISE only for
a specific keyword").

The seeds give PRECISE to "the unique exact match of a keyword". On DRCD dev a third of such
answers were wrong: documents titled with a common noun (governor, galaxy, policy, a city name)
became the unique match of any question mentioning the word in passing. A matched term is
specific when it is:

- an identifier: an error code, a setting or metric name (a separator inside, letters and digits),
  or a Latin word English does not know (a product name);
- the document's key;
- a Chinese term rare in the language: jieba's IDF at least ``RARE_IDF`` (above the table's
  median), or a compound of at least ``COMPOUND_MIN_CHARS`` characters the dictionary does not
  hold as one word (灰度发布, 连接池).

A common word is evidence (the candidate is still found through L0 and the level model), never
PRECISE by itself.
"""

from __future__ import annotations

from retrieval.lookup.keyword_index import text_normalise
from retrieval.lookup.query_terms import _CJK, _idf, _is_identifier

RARE_IDF = 11.0
COMPOUND_MIN_CHARS = 3
RARE_ENGLISH = 1e-6


def term_specific(term: str, doc_key: str = "") -> bool:
    term = text_normalise(term)
    if not term:
        return False
    if doc_key and term == text_normalise(doc_key):
        return True
    if not _CJK.search(term):
        words = term.split()
        if any(_is_identifier(w) for w in words):
            return True
        _idf.load()
        return all(_idf.english(w, "en") < RARE_ENGLISH for w in words if w.isalpha())
    _idf.load()
    idf = _idf.table.get(term)
    if idf is not None:
        return idf >= RARE_IDF
    return len(term) >= COMPOUND_MIN_CHARS
