"""A flood of refused calls writes one log line per agent per window, not one WARNING per call
(config/refusal_logging.py on the ``django.request`` logger)."""

from __future__ import annotations

import logging
import uuid

import pytest
from django.test import RequestFactory
from rest_framework.test import APIClient

from config.refusal_logging import RefusalsOncePerWindow
from retrieval.agents.tokens import tool_token_issue
from tests.security.test_budgets import PROMPT, _rates


@pytest.fixture
def request_log():
    """Every record the django.request logger lets through its filters (as its handlers see them)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("django.request")
    handler = Keep(level=logging.DEBUG)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


@pytest.mark.django_db
def test_a_flood_of_100_refused_calls_logs_one_info_line_and_no_warning(settings, request_log):
    # Given an agent with 3 calls a minute
    _rates(settings, tool="3/min")
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {tool_token_issue(name=f'flood-{uuid.uuid4().hex[:6]}').key}"
    )
    # When it calls 103 times
    statuses = [client.get(PROMPT).status_code for _ in range(103)]
    # Then 100 are refused, and the log holds one INFO line for them, naming the agent and path
    assert statuses.count(429) == 100
    refusals = [r for r in request_log if getattr(r, "status_code", None) == 429]
    assert [r.levelno for r in refusals] == [logging.INFO]
    line = refusals[0].getMessage()
    assert line.startswith("budget refused (429) token ") and " (agent " in line and PROMPT in line
    assert not any(r.levelno >= logging.WARNING for r in refusals)


@pytest.mark.django_db
def test_another_status_still_logs_its_warning(request_log):
    APIClient().get(PROMPT)  # no token: 401
    assert [r.levelno for r in request_log if getattr(r, "status_code", None) == 401] == [logging.WARNING]


def _refusal(path: str = "/api/x", address: str = "10.0.0.1") -> logging.LogRecord:
    record = logging.LogRecord(
        "django.request", logging.WARNING, __file__, 1, "Too Many Requests: %s", (path,), None
    )
    record.status_code = 429
    record.request = RequestFactory().get(path, REMOTE_ADDR=address)
    return record


def test_the_next_window_logs_again_with_the_count_held_back():
    now = [0.0]
    quiet = RefusalsOncePerWindow(window=60, clock=lambda: now[0])
    # Five refusals of one address in a window: the first passes
    assert [quiet.filter(_refusal()) for _ in range(5)] == [True, False, False, False, False]
    # Another address has its own line
    assert quiet.filter(_refusal(address="10.0.0.2"))
    # A window later the address logs again, saying four were held back
    now[0] = 61.0
    again = _refusal()
    assert quiet.filter(again)
    assert "address 10.0.0.1" in again.getMessage() and "4 more refusals" in again.getMessage()
