"""Budgets an agent cannot outspend: one atomic count per agent, whatever the transport, the
thread or the number of tokens; keys that fail are counted per client address.

Embedded default here (one process, the in-process counter under a lock); the same count on
Redis across gunicorn workers is ``test_budgets_processes.py`` (service-backed run).
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from rest_framework.test import APIClient

from retrieval.agents.throttling import agent_budget_spend, failed_auth_spend
from retrieval.agents.tokens import tool_token_issue

PROMPT = "/api/prompts/executor"  # a cheap agent-facing endpoint: no vector search
DIFY = "/api/dify/retrieval"
BAD_KEY = "0123456789abcdef0123456789abcdef01234567"


def _rates(settings, **rates: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **rates},
    }


def _address() -> str:
    """A client address of this test alone (the Redis count outlives a test run)."""
    n = uuid.uuid4().int
    return f"10.{n % 250 + 1}.{n // 250 % 250 + 1}.{n // 62500 % 250 + 1}"


def _client(key: str, scheme: str = "Token") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    return client


# --- one count per agent ----------------------------------------------------------------------------
def test_sixteen_threads_spending_one_budget_get_exactly_the_budget(settings):
    # Given a budget of 20 calls a minute
    _rates(settings, tool="20/min")
    budget_id = f"race-{uuid.uuid4().hex}"
    barrier = threading.Barrier(16)

    def spend(_):
        barrier.wait()
        return [agent_budget_spend(budget_id) for _ in range(10)]

    # When 16 threads spend 160 calls at once
    with ThreadPoolExecutor(16) as pool:
        waits = [w for batch in pool.map(spend, range(16)) for w in batch]

    # Then exactly 20 are allowed, and every refusal says how long to wait
    assert waits.count(None) == 20
    assert all(1 <= w <= 60 for w in waits if w is not None)


@pytest.mark.django_db(transaction=True)
def test_an_agent_flooding_rest_from_threads_gets_its_budget_and_no_more(settings, live_server):
    # Given an agent with a budget of 20 calls a minute, and a live threaded server
    _rates(settings, tool="20/min")
    key = tool_token_issue(name=f"flooder-{uuid.uuid4().hex[:6]}").key
    url = f"{live_server.url}{PROMPT}"

    def call(_):
        return httpx.get(url, headers={"Authorization": f"Token {key}"}, timeout=30)

    # When 16 threads send 80 requests
    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(call, range(80)))

    # Then 20 are answered and 60 refused with 429, Retry-After and the API's error format
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 20 and statuses.count(429) == 60
    refused = next(r for r in responses if r.status_code == 429)
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.json()["error"]["code"] == "throttled"
    assert refused.json()["error"]["details"]["retry_after_seconds"] >= 1


@pytest.mark.django_db
def test_a_second_token_or_another_endpoint_gives_no_extra_calls(settings, vector_store):
    # Given an agent with 3 calls a minute that spends them on REST
    _rates(settings, tool="3/min")
    name = f"greedy-{uuid.uuid4().hex[:6]}"
    first = _client(tool_token_issue(name=name).key)
    assert [first.get(PROMPT).status_code for _ in range(3)] == [200, 200, 200]
    # When it rotates its token and tries REST again, then Dify
    second = tool_token_issue(name=name, rotate=True).key
    # Then both are refused: the budget is the agent's
    assert _client(second).get(PROMPT).status_code == 429
    dify = _client(second, "Bearer").post(DIFY, {"knowledge_id": "*"}, format="json")
    assert dify.status_code == 429
    assert dify.json()["error_code"] == 3002 and int(dify["Retry-After"]) >= 1
    # And another agent is untouched
    assert (
        _client(tool_token_issue(name=f"bystander-{uuid.uuid4().hex[:6]}").key).get(PROMPT).status_code == 200
    )


# --- keys that fail, per address --------------------------------------------------------------------
@pytest.mark.django_db
def test_bad_keys_on_rest_are_refused_with_429_past_the_address_budget(settings):
    # Given 3 failed keys a minute per address
    _rates(settings, failed_auth="3/min")
    address = _address()
    guesser = APIClient(REMOTE_ADDR=address)
    guesser.credentials(HTTP_AUTHORIZATION=f"Token {BAD_KEY}")

    # When it presents a wrong key five times
    responses = [guesser.get(PROMPT) for _ in range(5)]

    # Then three 401s, then 429 with Retry-After
    assert [r.status_code for r in responses] == [401, 401, 401, 429, 429]
    assert responses[0].json()["error"]["code"] == "authentication_failed"
    assert responses[-1].json()["error"]["code"] == "throttled" and int(responses[-1]["Retry-After"]) >= 1
    # A forged X-Forwarded-For does not buy a fresh address
    forged = APIClient(REMOTE_ADDR=address, HTTP_X_FORWARDED_FOR="203.0.113.9")
    forged.credentials(HTTP_AUTHORIZATION=f"Token {BAD_KEY}")
    assert forged.get(PROMPT).status_code == 429
    # And an agent with a valid token at the same address is served
    honest = APIClient(REMOTE_ADDR=address)
    honest.credentials(
        HTTP_AUTHORIZATION=f"Token {tool_token_issue(name=f'same-ip-{uuid.uuid4().hex[:6]}').key}"
    )
    assert honest.get(PROMPT).status_code == 200


@pytest.mark.django_db
def test_bad_keys_on_dify_are_refused_with_3002_past_the_address_budget(settings):
    _rates(settings, failed_auth="2/min")
    guesser = APIClient(REMOTE_ADDR=_address())
    guesser.credentials(HTTP_AUTHORIZATION=f"Bearer {BAD_KEY}")
    responses = [guesser.post(DIFY, {"knowledge_id": "*"}, format="json") for _ in range(3)]
    assert [r.status_code for r in responses] == [403, 403, 429]
    assert [r.json()["error_code"] for r in responses] == [1002, 1002, 3002]
    assert int(responses[-1]["Retry-After"]) >= 1


def test_only_failures_spend_an_address_budget(settings):
    _rates(settings, failed_auth="2/min")
    address = f"address-{uuid.uuid4().hex}"
    assert [failed_auth_spend(address) is None for _ in range(3)] == [True, True, False]
    assert failed_auth_spend(f"address-{uuid.uuid4().hex}") is None  # another address


# --- what a refusal costs -----------------------------------------------------------------------------
@pytest.mark.django_db
def test_an_agent_past_its_budget_is_refused_again_without_a_database_query(
    settings, django_assert_num_queries, vector_store
):
    # Given an agent that spent its 2 calls a minute and was refused once
    _rates(settings, tool="2/min")
    key = tool_token_issue(name=f"flooding-{uuid.uuid4().hex[:6]}").key
    rest, dify = _client(key), _client(key, "Bearer")
    assert [rest.get(PROMPT).status_code for _ in range(3)] == [200, 200, 429]
    # When it keeps calling, over REST and Dify
    with django_assert_num_queries(0):
        again = rest.get(PROMPT)
        dify_again = dify.post(DIFY, {"knowledge_id": "*"}, format="json")
    # Then it is refused as before, with Retry-After, and the database is not asked
    assert again.status_code == 429 and 1 <= int(again["Retry-After"]) <= 60
    assert again.json()["error"]["code"] == "throttled"
    assert dify_again.status_code == 429 and dify_again.json()["error_code"] == 3002


def test_a_call_is_free_again_once_the_oldest_leaves_the_window(settings):
    # Given a budget of 2 calls a second, spent
    _rates(settings, tool="2/s")
    budget_id = f"window-{uuid.uuid4().hex}"
    assert [agent_budget_spend(budget_id) is None for _ in range(3)] == [True, True, False]
    # When the window has passed, then calls are allowed again, as many as the budget
    import time

    time.sleep(1.1)
    assert [agent_budget_spend(budget_id) is None for _ in range(3)] == [True, True, False]


# --- the burst cap ------------------------------------------------------------------------------------
def test_a_burst_past_the_cap_is_refused_and_the_minute_budget_still_holds(settings):
    # Given a budget of 5 calls a minute, at most 3 of them in any second
    _rates(settings, tool="5/min", tool_burst="3/s")
    budget_id = f"burst-{uuid.uuid4().hex}"
    # When 5 calls arrive at once, then 3 are allowed and the rest told to wait about a second
    waits = [agent_budget_spend(budget_id) for _ in range(5)]
    assert [w is None for w in waits] == [True, True, True, False, False]
    assert all(w is not None and 1 <= w <= 1.5 for w in waits[3:])
    # When the second has passed, then the minute's 2 remaining calls are allowed (the refused ones
    # counted in neither window), and after them the wait is the minute's
    import time

    time.sleep(1.1)
    waits = [agent_budget_spend(budget_id) for _ in range(3)]
    assert [w is None for w in waits] == [True, True, False]
    assert waits[2] > 55


def test_sixteen_threads_get_the_burst_cap_and_no_more(settings):
    # Given a large budget a minute with a cap of 10 calls a second
    _rates(settings, tool="1000/min", tool_burst="10/s")
    budget_id = f"burst-race-{uuid.uuid4().hex}"
    barrier = threading.Barrier(16)

    def spend(_):
        barrier.wait()
        return [agent_budget_spend(budget_id) for _ in range(5)]

    # When 16 threads spend 80 calls at once (well inside one second)
    import time

    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        waits = [w for batch in pool.map(spend, range(16)) for w in batch]
    # Then exactly the cap is allowed
    if time.monotonic() - started < 1:
        assert waits.count(None) == 10
    assert waits.count(None) <= 20


def test_an_empty_burst_setting_means_no_cap(settings):
    _rates(settings, tool="50/min", tool_burst="")
    budget_id = f"no-cap-{uuid.uuid4().hex}"
    assert [agent_budget_spend(budget_id) is None for _ in range(51)] == [True] * 50 + [False]


@pytest.mark.django_db(transaction=True)
def test_an_agent_past_its_burst_cap_gets_rests_429_and_is_served_again_a_second_later(settings):
    # Given an agent whose cap is 2 calls a second
    _rates(settings, tool="100/min", tool_burst="2/s")
    rest = _client(tool_token_issue(name=f"burster-{uuid.uuid4().hex[:6]}").key)
    # When it sends 3 calls at once, then the third is refused with the budget's 429
    responses = [rest.get(PROMPT) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert responses[2].json()["error"]["code"] == "throttled" and responses[2]["Retry-After"] == "1"
    # And once the Retry-After has passed it is served again
    import time

    time.sleep(1.1)
    assert rest.get(PROMPT).status_code == 200


@pytest.mark.parametrize("name", ["API_THROTTLE_TOOL", "API_THROTTLE_TOOL_BURST", "API_THROTTLE_FAILED_AUTH"])
def test_a_malformed_rate_is_refused_at_start_naming_the_setting(name):
    from tests.support.settings_start import django_setup

    out = django_setup({name: "20/fortnight"})
    assert out.returncode != 0
    assert f"{name} must be a rate such as 600/min or 20/s" in out.stderr and "'20/fortnight'" in out.stderr
