"""The domains list shows each domain's when_to_retrieve and says who writes it: without an LLM,
the offline extractive summariser (and how to configure one); with one, which model."""

import pytest
from django.urls import reverse

from knowledge.models import KnowledgeDomain

pytestmark = pytest.mark.django_db

DOMAINS = reverse("admin:knowledge_knowledgedomain_changelist")


@pytest.fixture
def payment():
    return KnowledgeDomain.objects.create(
        domain_id="payment",
        description="支付",
        when_to_retrieve="支付失败、退款、回调验签相关的问题",
        summary_source=KnowledgeDomain.SummarySource.EXTRACTIVE,
    )


def test_the_list_has_a_when_to_retrieve_column(admin_client, payment):
    page = admin_client.get(DOMAINS).content.decode()
    assert 'column-when_to_retrieve_short"' in page
    assert "支付失败、退款、回调验签相关的问题" in page


def test_without_an_llm_the_list_names_the_extractive_summariser_and_how_to_configure_one(
    admin_client, payment, settings
):
    settings.LLM_BASE_URL = ""
    page = admin_client.get(DOMAINS).content.decode()
    assert 'id="summariser-note"' in page
    assert "offline extractive summariser" in page
    assert "LLM_BASE_URL" in page and "LLM_API_KEY" in page and "LLM_MODEL" in page


def test_with_an_llm_the_list_names_its_model(admin_client, payment, settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://127.0.0.1:24999/v1", "qwen-plus"
    page = admin_client.get(DOMAINS).content.decode()
    assert "written by the LLM qwen-plus" in page
    assert "extractive summariser" not in page
