"""Fixtures of the knowledge tests."""

import pytest

from tests.support.domain_map import good_answers


@pytest.fixture
def llm(settings, fake_openai):
    """The local fake LLM endpoint as the summaries use it: well-behaved answers, no client
    retries (a task's own retries are what the tests count)."""
    settings.LLM_BASE_URL = fake_openai.base_url
    settings.LLM_MAX_RETRIES = 0
    fake_openai.responder = good_answers
    return fake_openai
