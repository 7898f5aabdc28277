"""Hostile input, generated: schemathesis fuzzes every operation of the OpenAPI schema
(/api/schema/) through the WSGI app, with an agent's token, and no answer may be a 5xx.

Bounded: ``AGENTKB_FUZZ_EXAMPLES`` generated cases per operation (default 50, the same cases
every run), about a minute in all on this machine. Raise it locally for a longer hunt:
``AGENTKB_FUZZ_EXAMPLES=500 .venv/bin/python -m pytest tests/config/test_api_fuzz.py``.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from knowledge.services.documents import document_ingest
from retrieval.agents.tokens import tool_token_issue

FUZZ_EXAMPLES = int(os.environ.get("AGENTKB_FUZZ_EXAMPLES", "50"))


@pytest.fixture
def agent_token(vector_store):
    document_ingest(
        data="---\ndomain: api\nkeywords: [ERR_TIMEOUT]\n---\n# 网关错误码\n\nERR_TIMEOUT：请求超时。".encode(),
        name="api/error-codes.md",
    )
    return tool_token_issue(name="fuzzer").key


@pytest.mark.django_db
def test_no_operation_answers_a_5xx_to_generated_input(agent_token, settings):
    from config.wsgi import application

    # Fuzzing would hit the per-token throttle within seconds; that is tested on its own.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"tool": "1000000/min"}}
    # As Django's test client does: a request must not close the connection holding the test's
    # transaction (MySQL would lose it; SQLite in memory ignores the close).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        _fuzz(application, agent_token)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _fuzz(application, agent_token: str, examples: int = FUZZ_EXAMPLES) -> None:
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
    headers = {"Authorization": f"Token {agent_token}"}
    # Dify sends its API key as a Bearer token: with the REST scheme every case would stop at 403.
    dify_headers = {"Authorization": f"Bearer {agent_token}"}
    server_errors: list[str] = []
    statuses: Counter[int] = Counter()
    dify_statuses: Counter[int] = Counter()
    operations = []
    nothing_to_break: list[str] = []
    for result, mode in itertools.product(list(schema.get_all_operations()), list(GenerationMode)):
        operation = result.ok()
        operations.append(operation.label)

        # POSITIVE: valid by the schema (extreme values, unicode); NEGATIVE: wrong types,
        # missing or extra fields, bodies that are not what the operation takes.
        @given(case=operation.as_strategy(generation_mode=mode))
        @hypothesis_settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case):
            is_dify = case.operation.label == "POST /api/dify/retrieval"
            response = case.call(headers=dify_headers if is_dify else headers)
            statuses[response.status_code] += 1
            if is_dify:
                dify_statuses[response.status_code] += 1
            if response.status_code >= 500:
                server_errors.append(
                    f"{case.method} {case.formatted_path} {case.body!r:.300} -> {response.status_code}"
                )

        try:
            fuzz()
        except Unsatisfiable:
            # An operation without parameters or body has no invalid input to make.
            nothing_to_break.append(f"{mode.value} {operation.label}")

    assert "POST /api/tools/lookup_knowledge" in operations
    assert server_errors == []
    assert "negative POST /api/tools/lookup_knowledge" not in nothing_to_break
    # The fuzzer got through authentication and was both accepted and refused.
    assert statuses[200] and statuses[400], statuses
    # Dify's endpoint included: past its Bearer check (negative cases also mangle the header),
    # most bodies refused with 400 (error 3001).
    assert "POST /api/dify/retrieval" in operations
    assert dify_statuses[400] > dify_statuses[403], dify_statuses
