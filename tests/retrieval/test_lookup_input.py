"""A query that shows nothing is refused like a blank one, naming the field; a query with any
visible character is kept (REST, MCP and the lookup command clean input here; Dify's endpoint
gives the same refusal, tests/retrieval/test_dify.py)."""

import pytest
from django.core.exceptions import ValidationError

from retrieval.lookup.inputs import ONLY_INVISIBLE, lookup_input_clean


@pytest.mark.parametrize(
    "query",
    [
        "\u200b",  # zero-width space
        "\ufeff\u200d\u200c",  # BOM, zero-width joiner and non-joiner
        "\u200e\u202e\u2066",  # bidi marks and overrides
        "\u2060\u00ad",  # word joiner, soft hyphen
        "\x00\x07\t",  # control characters
        "\ufe0f\U000e0101",  # variation selectors
        "\u3164\uffa0\u115f",  # Hangul fillers
        "\u2800",  # the blank Braille pattern
        "\u034f\u180b",  # combining grapheme joiner, Mongolian variation selector
    ],
)
def test_a_query_of_only_invisible_characters_is_refused_naming_the_query(query):
    with pytest.raises(ValidationError) as refused:
        lookup_input_clean(query=query, session_id="s", top_k=None)
    assert refused.value.message_dict == {"query": [ONLY_INVISIBLE]}


@pytest.mark.parametrize("query", ["\u200bERR_TIMEOUT", "e\u0301", "\u2764\ufe0f", "\u202e退款\u202c", "."])
def test_a_query_with_a_visible_character_is_kept(query):
    assert lookup_input_clean(query=query, session_id="s", top_k=None)[0] == query


def test_a_blank_query_keeps_its_message():
    with pytest.raises(ValidationError) as refused:
        lookup_input_clean(query="  \n ", session_id="s", top_k=None)
    assert refused.value.message_dict == {"query": ["This field may not be blank."]}
