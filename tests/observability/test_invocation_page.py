"""An invocation's page answers "why this answer?": a sentence from the recorded thresholds, the
L1 candidates with document, chunk and returned / withheld mark, links to the documents, what
the agent received, and the previous / next call of the session."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge.models import ApiDocument, KnowledgeDomain
from observability.explain import level_explanation
from observability.models import ToolInvocation

CHANGE = "admin:observability_toolinvocation_change"
THRESHOLDS = {"reference": 0.5, "highly_relevant": 0.75, "max_l2_distance": 2.0, "source": "settings"}


@pytest.mark.parametrize(
    ("level", "details", "sentence"),
    [
        (
            None,
            {"l1_top_similarity": 0.31, "thresholds": THRESHOLDS},
            "Best similarity 0.31 is below REFERENCE 0.50, so not found.",
        ),
        (
            None,
            {"thresholds": THRESHOLDS},
            "Neither keyword nor vector search found a candidate, so not found.",
        ),
        ("PRECISE", {"l0_match_count": 1}, "One keyword match (L0), returned first: PRECISE."),
        (
            "REFERENCE",
            {"l1_top_similarity": 0.62, "thresholds": THRESHOLDS},
            "Best similarity 0.62 is at or above REFERENCE 0.50 and below HIGHLY_RELEVANT 0.75: REFERENCE.",
        ),
        (
            "HIGHLY_RELEVANT",
            {"l1_top_similarity": 0.9, "thresholds": THRESHOLDS},
            "Best similarity 0.90 is at or above HIGHLY_RELEVANT 0.75: HIGHLY_RELEVANT.",
        ),
        (
            "DEDUPED",
            {"dedup_reason": "doc_retrieved", "withheld_doc_keys": ["a", "b"]},
            "Every passing document was already returned to this session (2 withheld): DEDUPED.",
        ),
        # An older or foreign shape: thresholds missing or not a dict, numbers as strings.
        (
            None,
            {"l1_top_similarity": 0.2, "thresholds": "odd"},
            "Best similarity 0.20 is below the REFERENCE threshold, so not found.",
        ),
        (
            None,
            {"l1_top_similarity": "0.2"},
            "Neither keyword nor vector search found a candidate, so not found.",
        ),
    ],
)
def test_the_sentence_says_why(level, details, sentence):
    assert (
        level_explanation(tool_name="lookup_knowledge", status="SUCCESS", level=level, details=details)
        == sentence
    )


def test_dify_and_error_calls_have_their_own_sentence():
    assert (
        level_explanation(
            tool_name="dify_retrieval",
            status="SUCCESS",
            level=None,
            details={"returned_doc_keys": ["a", "b"]},
        )
        == "Dify call: 2 record(s) above Dify's score threshold were returned."
    )
    assert level_explanation(tool_name="lookup_knowledge", status="ERROR", level=None, details=None) == (
        "The call failed before any level was decided."
    )


@pytest.mark.django_db
def test_the_page_links_documents_marks_candidates_and_walks_the_session(admin_client):
    KnowledgeDomain.objects.create(domain_id="api", description="接口")
    doc = ApiDocument.objects.create(doc_key="api/pay.md", title="支付接口", domain="api", content="x")
    now = timezone.now()

    def call(minutes, **details):
        return ToolInvocation.objects.create(
            tool_name="lookup_knowledge",
            session_id="conv-7",
            request={"query": "支付失败"},
            result_summary="REFERENCE: api/pay.md",
            relevance_level="REFERENCE",
            created_at=now - timedelta(minutes=minutes),
            retrieval_details={
                "thresholds": THRESHOLDS,
                "l1_top_similarity": 0.62,
                "returned_doc_keys": ["api/pay.md"],
                "withheld_doc_keys": ["api/old.md"],
                "l1_candidates": [
                    {
                        "doc_key": "api/pay.md",
                        "title": "支付接口",
                        "chunk_index": 2,
                        "score": 0.76,
                        "similarity": 0.62,
                    },
                    {
                        "doc_key": "api/old.md",
                        "title": "旧接口",
                        "chunk_index": 0,
                        "score": 0.8,
                        "similarity": 0.6,
                    },
                ],
                **details,
            },
        )

    first, middle, last = call(30), call(20), call(10)
    html = admin_client.get(reverse(CHANGE, args=[middle.pk])).content.decode()
    assert (
        "Best similarity 0.62 is at or above REFERENCE 0.50 and below HIGHLY_RELEVANT 0.75: REFERENCE."
        in html
    )
    assert reverse("admin:knowledge_apidocument_change", args=[doc.pk]) in html
    assert "支付接口" in html and "okb-returned" in html and "okb-withheld" in html
    assert "REFERENCE: api/pay.md" in html
    assert reverse(CHANGE, args=[first.pk]) in html and reverse(CHANGE, args=[last.pk]) in html
    # Level shown once (the summary), not again in a fieldset.
    assert html.count(">relevance_level<") == 0
