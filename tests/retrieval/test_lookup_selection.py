"""Selection through a real lookup (real embedder, Milvus, keyword index, action memory): the level
when an L0 match is withheld, FS-2's "L0 matchCount = 3, similarity 0.6 -> REFERENCE", marking
exactly what is returned, and hard domain dedup judged on the best remaining document.

Similarities (USE multilingual, ingestion's embedding text) of the query "ZQ_QUOTA_LIMIT 配额上限":
quota.md ~0.58, gateway.md ~0.42, billing.md ~0.31, so only quota.md gets an L1 level.
"""

from __future__ import annotations

import pytest

from retrieval.agents.identity import memory_session_key
from retrieval.agents.tracker import get_tracker
from retrieval.services import lookup_knowledge

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seeds_rules")]

QUERY = "ZQ_QUOTA_LIMIT 配额上限"
KEYWORD = "ZQ_QUOTA_LIMIT"


@pytest.fixture
def corpus(reused_corpus):
    """This module's corpus, on the collection the lookup tests share (it is emptied after each
    test): the lookup, not the collection's creation, is what these tests time."""
    return reused_corpus


def _memory_key(session_id):
    return memory_session_key(agent_id=None, agent="", session_id=session_id)


def _doc_keys(body):
    return [item["docKey"] for item in ([body["primary"]] if body["primary"] else []) + body["supplement"]]


def _add_quota(corpus, domain="api"):
    corpus.add("quota.md", title="配额说明", domain=domain, keywords=[KEYWORD], chunks=["租户配额上限的设置"])


def _add_gateway(corpus, domain="api"):
    corpus.add(
        "gateway.md", title="网关限流", domain=domain, keywords=[KEYWORD], chunks=["网关限流与配额的关系。"]
    )


def _add_billing(corpus, domain="api"):
    corpus.add("billing.md", title="计费规则", domain=domain, keywords=[KEYWORD], chunks=["按调用次数计费。"])


def test_a_lone_returned_l0_match_is_not_precise_when_the_other_match_was_withheld(corpus, session_id):
    _add_gateway(corpus)
    _add_billing(corpus)
    get_tracker().mark_retrieved(_memory_key(session_id), "api", "gateway.md")
    outcome = lookup_knowledge(query=QUERY, session_id=session_id)
    # matchCount is 2 (one of them withheld): FS-2 says REFERENCE, not PRECISE.
    assert outcome.details["l0_match_count"] == 2
    assert outcome.details["withheld_doc_keys"] == ["gateway.md"]
    assert _doc_keys(outcome.body) == ["billing.md"]
    assert outcome.details["l1_top_similarity"] < 0.5
    assert outcome.body["relevanceLevel"] == "REFERENCE"
    assert outcome.details["dedup_reason"] == "doc_retrieved"


def test_fs2_three_l0_matches_and_a_middling_similarity_are_reference(corpus, session_id):
    _add_quota(corpus)
    _add_gateway(corpus)
    _add_billing(corpus)
    outcome = lookup_knowledge(query=QUERY, session_id=session_id)
    assert outcome.details["l0_match_count"] == 3
    assert 0.5 <= outcome.details["l1_top_similarity"] < 0.75
    assert outcome.body["relevanceLevel"] == "REFERENCE"
    # The L1-supported document first, then the other L0 matches by similarity.
    assert _doc_keys(outcome.body) == ["quota.md", "gateway.md", "billing.md"]


def test_only_the_returned_documents_are_marked_when_the_supplement_cuts_passing_ones(
    corpus, session_id, settings
):
    _add_quota(corpus)
    _add_gateway(corpus)
    _add_billing(corpus)
    settings.RETRIEVAL_MAX_SUPPLEMENT = 1
    outcome = lookup_knowledge(query=QUERY, session_id=session_id)
    # All three pass (L0 matches); primary + one supplement are returned, billing.md is cut.
    assert _doc_keys(outcome.body) == ["quota.md", "gateway.md"]
    assert get_tracker().snapshot(_memory_key(session_id)).doc_keys == {"quota.md", "gateway.md"}
    # So the cut document is still there for the next lookup.
    again = lookup_knowledge(query=QUERY, session_id=session_id)
    assert _doc_keys(again.body) == ["billing.md"]
    assert sorted(again.details["withheld_doc_keys"]) == ["gateway.md", "quota.md"]


def test_hard_domain_dedup_answers_when_only_a_lower_document_is_in_a_retrieved_domain(
    corpus, session_id, settings
):
    settings.RETRIEVAL_DOMAIN_DEDUP = "hard"
    _add_quota(corpus, domain="api")
    _add_billing(corpus, domain="infra")
    # The session already retrieved a document of "infra", none of "api".
    get_tracker().mark_retrieved(_memory_key(session_id), "infra", "infra/earlier.md")
    outcome = lookup_knowledge(query=QUERY, session_id=session_id)
    # The best remaining document (quota.md, api) decides: answered, not blocked.
    assert outcome.body["found"] is True
    assert outcome.details["blocked_domain"] is None
    assert outcome.details["dedup_reason"] is None
    assert _doc_keys(outcome.body) == ["quota.md", "billing.md"]
    assert outcome.body["relevanceLevel"] == "REFERENCE"
