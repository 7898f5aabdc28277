"""The call record's contract (observability.records): one set of keys, typed, and the names stored
in columns of their own, owned by observability and filled by retrieval."""

from __future__ import annotations

import typing

import pytest
from django.core.exceptions import ImproperlyConfigured

from observability import calibration, records
from observability.models import ToolInvocation
from observability.records import (
    LOOKUP_KEYS,
    DedupReason,
    LookupRecord,
    RelevanceLevel,
    ToolName,
    lookup_details,
)


def test_the_typed_record_has_exactly_the_contract_s_keys_in_its_order():
    assert tuple(typing.get_type_hints(LookupRecord)) == LOOKUP_KEYS


def test_a_record_refuses_a_key_outside_the_contract_and_names_a_missing_one():
    values = {key: None for key in LOOKUP_KEYS}
    assert list(lookup_details(**values)) == list(LOOKUP_KEYS)
    with pytest.raises(TypeError, match="not retrieval_details keys: score"):
        lookup_details(**values, score=1.0)
    del values[records.TIMINGS]
    with pytest.raises(TypeError, match="lacks: timings"):
        lookup_details(**values)


def test_the_stored_names_are_the_seeds():
    assert [level.value for level in RelevanceLevel] == ["PRECISE", "HIGHLY_RELEVANT", "REFERENCE", "DEDUPED"]
    assert [reason.value for reason in DedupReason] == ["doc_retrieved", "domain_retrieved"]
    assert {tool.value for tool in ToolName} == {"lookup_knowledge", "dify_retrieval"}
    # the V010 columns hold them whole
    assert (
        max(len(level) for level in RelevanceLevel)
        <= ToolInvocation._meta.get_field("relevance_level").max_length
    )
    assert (
        max(len(reason) for reason in DedupReason)
        <= ToolInvocation._meta.get_field("dedup_reason").max_length
    )


def test_observability_reads_the_thresholds_in_settings_only_through_the_reader_retrieval_registered(
    monkeypatch, db
):
    monkeypatch.setattr(calibration, "_settings_reader", None)
    with pytest.raises(ImproperlyConfigured, match="retrieval app installed"):
        calibration.thresholds_in_force()

    class Pair:
        highly_relevant, reference = 0.7, 0.4

    calibration.settings_thresholds_reader_register(Pair)
    in_force = calibration.thresholds_in_force()
    assert (in_force.highly_relevant, in_force.reference, in_force.source) == (0.7, 0.4, "settings")
