"""Dify's whole condition language, posted over HTTP exactly as Dify's client builds and retries it
(tests/support/dify_client.py), against a live agentkb; plus the evaluation rules on plain rows.

The corpus is the seeds' (tests/retrieval/conftest.py) with front-matter metadata on three
documents: ``version`` (a number) and ``published`` (a date), and one document uploaded in 2024.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from knowledge.models import ApiDocument
from knowledge.vectorstore import reset_vector_store
from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue
from retrieval.lookup.metadata_conditions import ConditionError, metadata_condition_clean
from tests.conftest import free_port
from tests.retrieval.conftest import seed_documents
from tests.support.dify_client import DifyClient, MaxRetriesReached, condition, metadata_condition

POOL, HIKARI, ERRORS = "infrastructure/mysql-pool.md", "infrastructure/hikaricp.md", "api/error-codes.md"
ALL_DOCS = {
    POOL,
    HIKARI,
    ERRORS,
    "infrastructure/pool-exhaustion.md",
    "infrastructure/redis-cache.md",
    "troubleshooting/incident-process.md",
    "troubleshooting/log-analysis.md",
    "payment/refund.md",
}
FRONT_MATTER = {
    POOL: {"version": 3, "published": "2024-05-01", "owner": "dba"},
    HIKARI: {"version": 5, "published": "2025-02-10"},
    ERRORS: {"version": 1, "published": "2023-11-20"},
}
UPLOADED_2024 = datetime(2024, 1, 15, 9, 30, tzinfo=UTC)


def ts(day: str) -> int:
    """A Unix timestamp, as Dify sends its time metadata."""
    return int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp())


# --- Dify over HTTP ----------------------------------------------------------------------------------
@pytest.fixture
def world(corpus, live_server):
    seed_documents(corpus)
    for doc_key, extra in FRONT_MATTER.items():
        document = ApiDocument.objects.get(doc_key=doc_key)
        document.metadata = {**document.metadata, "extra": extra}
        document.save(update_fields=["metadata"])
    ApiDocument.objects.filter(doc_key=POOL).update(created_at=UPLOADED_2024)
    token = tool_token_issue(name="dify-workspace")
    return DifyClient(endpoint=f"{live_server.url}/api/dify", api_key=token.key, backoff_factor=0)


def _doc_keys(dify: DifyClient, condition_body: dict | None, *, query: str = "配置说明") -> set[str]:
    records = dify.retrieve(query=query, knowledge_id="*", top_k=50, metadata_condition=condition_body)
    assert dify.responses[-1].status_code == 200, dify.responses[-1].text
    return {r["metadata"]["doc_key"] for r in records}


pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("=", 3, {POOL}),
        ("≠", 3, {HIKARI, ERRORS}),  # documents without a version are not "≠ 3": SQL's NULL, as in Dify
        (">", 3, {HIKARI}),
        ("<", 3, {ERRORS}),
        ("≥", 3, {POOL, HIKARI}),
        ("≤", 3, {POOL, ERRORS}),
        ("=", "5", {HIKARI}),  # a number typed as text
        ("is", 1, {ERRORS}),  # Dify compares "is" with a number numerically
    ],
)
def test_number_operators_over_numeric_metadata(world, operator, value, expected):
    body = metadata_condition([condition("version", operator, value)])
    assert _doc_keys(world, body) == expected


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("before", ts("2024-06-01"), {POOL, ERRORS}),
        ("after", ts("2024-06-01"), {HIKARI}),
        ("after", "2024-05-01", {HIKARI}),  # a date is its midnight: the pool's own day is not after it
        ("before", "2024-05-01T00:00:01Z", {POOL, ERRORS}),
        ("<", ts("2024-01-01"), {ERRORS}),  # Dify's numeric operators work on times too
    ],
)
def test_time_operators_over_date_metadata(world, operator, value, expected):
    body = metadata_condition([condition("published", operator, value)])
    assert _doc_keys(world, body) == expected


def test_difys_built_in_fields_map_to_agentkbs(world):
    assert _doc_keys(world, metadata_condition([condition("upload_date", "before", ts("2024-06-01"))])) == {
        POOL
    }
    a_day_ago = int((timezone.now() - timedelta(days=1)).timestamp())
    assert _doc_keys(
        world, metadata_condition([condition("upload_date", "after", a_day_ago)])
    ) == ALL_DOCS - {POOL}
    assert (
        _doc_keys(world, metadata_condition([condition("last_update_date", "after", a_day_ago)])) == ALL_DOCS
    )
    # document_name: the title Dify shows for an external record, or the file's name.
    assert _doc_keys(world, metadata_condition([condition("document_name", "is", "退款处理指南")])) == {
        "payment/refund.md"
    }
    assert _doc_keys(world, metadata_condition([condition("document_name", "start with", "hikari")])) == {
        HIKARI
    }
    assert _doc_keys(world, metadata_condition([condition("source", "is", "file_upload")])) == ALL_DOCS
    assert _doc_keys(world, metadata_condition([condition("source", "is", "notion")])) == set()


def test_a_condition_left_without_a_value_is_ignored(world):
    every = _doc_keys(world, None)
    assert every == ALL_DOCS
    for operator in ("is", "contains", "=", "before", "in"):
        assert _doc_keys(world, metadata_condition([condition("version", operator, None)])) == every
    # Beside a real condition it neither narrows (and) nor widens (or) the answer.
    for logical in ("and", "or"):
        body = metadata_condition(
            [condition("version", ">", 3), condition("title", "contains", None)], logical_operator=logical
        )
        assert _doc_keys(world, body) == {HIKARI}


def test_conditions_null_is_no_filter_and_an_unknown_field_matches_nothing(world):
    assert _doc_keys(world, metadata_condition(None)) == ALL_DOCS
    assert _doc_keys(world, metadata_condition([], logical_operator=None)) == ALL_DOCS
    assert _doc_keys(world, metadata_condition([condition("author", "is", "someone")])) == set()
    assert _doc_keys(world, metadata_condition([condition("author", "not empty")])) == set()
    # A field only some documents have: only those can match.
    assert _doc_keys(world, metadata_condition([condition("owner", "is", "dba")])) == {POOL}
    either = metadata_condition([condition("author", "is", "x"), condition("domain", "is", "api")], "or")
    assert _doc_keys(world, either) == {ERRORS}


def test_difys_connection_check_passes_with_a_tool_token_and_fails_without(world):
    world.check_endpoint()  # no body at all: answered 400 (code 3001), which Dify accepts
    assert [r.status_code for r in world.responses] == [400]
    assert world.responses[0].json()["error_code"] == 3001
    wrong = DifyClient(endpoint=world.endpoint, api_key="not-a-token", backoff_factor=0)
    with pytest.raises(ValueError, match="Forbidden"):
        wrong.check_endpoint()
    missing = DifyClient(endpoint=world.endpoint.removesuffix("/dify") + "/nowhere", api_key=world.api_key)
    with pytest.raises(ValueError, match="Not Found"):
        missing.check_endpoint()


def _tool_rate(settings, rate: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "tool": rate},
    }


def test_a_throttled_call_is_answered_when_difys_retry_comes_after_the_window(world, settings):
    _tool_rate(settings, "1/min")
    first = world.retrieve(query="数据库连接池配置", knowledge_id="*")

    def budget_comes_back(attempt, response):
        if response.status_code == 429:
            assert response.json()["error_code"] == 3002
            _tool_rate(settings, "100/min")  # the window is over before Dify's next retry

    world.on_response = budget_comes_back
    second = world.retrieve(query="数据库连接池配置", knowledge_id="*")
    assert [r.status_code for r in world.responses] == [200, 429, 200]
    assert first and second == first  # no action memory: a retry gets the same records

    world.on_response = None
    _tool_rate(settings, "1/min")
    with pytest.raises(MaxRetriesReached):  # still throttled: Dify gives up loudly, after 3 retries
        world.retrieve(query="数据库连接池配置", knowledge_id="*")
    assert [r.status_code for r in world.responses[3:]] == [429] * 4


def test_a_5xx_is_retried_by_dify_and_answered_once_milvus_is_back(world, settings):
    working_uri = settings.MILVUS_URI
    settings.MILVUS_URI = f"http://127.0.0.1:{free_port()}"
    settings.MILVUS_TIMEOUT = 2
    reset_vector_store()

    def milvus_comes_back(attempt, response):
        if response.status_code == 503:
            assert response.json()["error_code"] == 5001
            settings.MILVUS_URI = working_uri
            reset_vector_store()

    world.on_response = milvus_comes_back
    records = world.retrieve(query="数据库连接池配置", knowledge_id="*", top_k=3)
    assert [r.status_code for r in world.responses] == [503, 200]
    assert records and records[0]["metadata"]["doc_key"] == POOL
    recorded = list(ToolInvocation.objects.filter(tool_name="dify_retrieval").order_by("id"))
    assert [r.status for r in recorded] == ["ERROR", "SUCCESS"]


# --- the rules on plain rows -------------------------------------------------------------------------
ROW = {
    "doc_key": "payment/refund-guide.md",
    "title": "退款指南",
    "domain": "payment",
    "metadata": {"keywords": ["退款", "refund"], "extra": {"tags": ["a", "b"], "score": 7.5}},
    "created_at": datetime(2025, 3, 1, tzinfo=UTC),
    "updated_at": datetime(2025, 3, 2, tzinfo=UTC),
}


@pytest.mark.parametrize(
    ("item", "holds"),
    [
        (condition("document_name", "is", "refund-guide.md"), True),
        (condition("document_name", "contains", "指南"), True),
        (condition("document_name", "not contains", "refund"), False),
        (condition("keywords", "not in", ["x", "y"]), True),
        (condition("keywords", "≠", "退款"), False),
        (condition("tags", "in", "b, c"), True),
        (condition("score", "≥", 7.5), True),
        (condition("score", ">", 7.5), False),
        (condition("last_update_date", "after", "2025-03-01T12:00:00+00:00"), True),
        (condition("upload_date", "after", "2025-03-01"), False),
        (condition("missing", "empty"), True),
        (condition("missing", "is not", "x"), False),
        (condition("title", "=", 3), False),  # not a number: no match, no error
    ],
    ids=str,
)
@pytest.mark.django_db(transaction=False)
def test_rules_on_one_row(item, holds):
    assert metadata_condition_clean(metadata_condition([item])).passes(ROW) is holds


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (condition("version", ">", "three"), "metadata_condition.conditions[0].value"),
        (condition("published", "before", "next tuesday"), "metadata_condition.conditions[0].value"),
        (condition("version", "≈", 3), "metadata_condition.conditions[0].comparison_operator"),
        ({"comparison_operator": "is", "value": "x"}, "metadata_condition.conditions[0].name"),
    ],
)
@pytest.mark.django_db(transaction=False)
def test_malformed_conditions_are_refused_naming_the_field(item, field):
    with pytest.raises(ConditionError) as raised:
        metadata_condition_clean(metadata_condition([item]))
    assert list(raised.value.message_dict) == [field]
