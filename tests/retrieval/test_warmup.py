"""A process warms up at start: the model, the analyser, the IDF table and the lexical index are
loaded before the first request, and a part that cannot load does not stop the start."""

from __future__ import annotations

from unittest import mock

import pytest

from retrieval.lookup import query_terms
from retrieval.warmup import process_warm_up


@pytest.mark.django_db
def test_warm_up_loads_every_part(vector_store):
    import wordfreq

    fresh = query_terms._Idf()
    query_terms.query_terms.cache_clear()
    wordfreq.get_frequency_dict.cache_clear()
    wordfreq._wf_cache.clear()  # its per-word cache: a word another test looked up is not reloaded
    with mock.patch.object(query_terms, "_idf", fresh):
        took = process_warm_up()
        assert fresh.loaded
    # English words' frequencies too: the first query with one paid 0.1-0.2 s to load them
    assert wordfreq.get_frequency_dict.cache_info().currsize >= 1
    assert set(took) == {"embedder", "analyser", "query_terms", "lexical_index"}
    assert all(isinstance(seconds, float) for seconds in took.values()), took


@pytest.mark.django_db
def test_a_part_that_cannot_load_is_reported_and_the_rest_still_load(vector_store):
    with mock.patch("knowledge.lexical.get_lexical_engine", side_effect=RuntimeError("no index")):
        took = process_warm_up()
    assert took["lexical_index"] == "RuntimeError: no index"
    assert isinstance(took["embedder"], float)
