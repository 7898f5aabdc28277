"""A lookup's own ``metadata_condition`` (issue 25, per-call filters): Dify's condition language on
document metadata, taken by REST, MCP and the OpenAI tool, applied before ranking on L0 and L1.

A document failing the condition is no candidate at all: it is not the answer, not withheld as
already sent, not searched for in L1 (so ``top_k`` chunks are all eligible), and a cached L1 answer
of another condition (or of none) is never reused.
"""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from knowledge.models import ApiDocument
from observability.models import ToolInvocation
from retrieval.agents.tokens import tool_token_issue
from retrieval.lookup import vector_search
from retrieval.lookup.corpus import corpus_signature
from retrieval.lookup.vector_search import l1_search
from tests.retrieval.conftest import seed_documents
from tests.retrieval.test_mcp_server import live_asgi  # noqa: F401 (a fixture)

LOOKUP = "/api/tools/lookup_knowledge"
POOL = "infrastructure/mysql-pool.md"
V2, V3 = "api/error-codes.md", "api/error-codes-v3.md"


def _returned(body: dict) -> list[str]:
    items = ([body["primary"]] if body["primary"] else []) + body["supplement"]
    return [item["docKey"] for item in items]


def _client() -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {tool_token_issue(name=f'cond-{uuid.uuid4().hex[:8]}').key}"
    )
    return client


def _condition(*conditions: tuple[str, str, object], logical: str = "and") -> dict:
    return {
        "logical_operator": logical,
        "conditions": [{"name": n, "comparison_operator": op, "value": v} for n, op, v in conditions],
    }


def _front_matter(doc_key: str, **fields) -> None:
    """Give a document front-matter fields (``metadata["extra"]``, where ingestion keeps them)."""
    metadata = ApiDocument.objects.get(doc_key=doc_key).metadata
    ApiDocument.objects.filter(doc_key=doc_key).update(metadata={**metadata, "extra": fields})


def versioned_documents(corpus) -> None:
    """The seeds' corpus, with the error codes in two versions sharing the exact keyword
    ERR_TIMEOUT (version 2 and version 3 of the gateway) and the pool document archived."""
    seed_documents(corpus)
    corpus.add(
        V3,
        title="网关错误码说明（v3）",
        domain="api",
        keywords=["ERR_TIMEOUT", "ERR_RATE_LIMITED"],
        chunks=[("超时", "ERR_TIMEOUT：v3 网关的请求超时错误码，客户端按退避策略重试。")],
    )
    _front_matter(V2, version=2, product="gateway")
    _front_matter(V3, version=3, product="gateway")
    _front_matter(POOL, version=1, status="archived")


@pytest.fixture
def versioned_corpus(corpus):
    versioned_documents(corpus)
    return corpus


def _post(client: APIClient, session: str, **body):
    return client.post(LOOKUP, body, format="json", HTTP_X_SESSION_ID=session)


# --- L0: an exact keyword ----------------------------------------------------------------------------
@pytest.mark.django_db
def test_on_l0_a_condition_excluding_the_best_document_makes_the_next_one_the_answer(
    versioned_corpus, session_id
):
    client = _client()
    newer = _post(
        client, f"{session_id}-a", query="ERR_TIMEOUT", metadata_condition=_condition(("version", "≥", 3))
    ).json()
    older = _post(
        client, f"{session_id}-b", query="ERR_TIMEOUT", metadata_condition=_condition(("version", "<", 3))
    ).json()
    assert newer["primary"]["docKey"] == V3 and newer["relevanceLevel"] == "PRECISE"
    assert older["primary"]["docKey"] == V2 and older["relevanceLevel"] == "PRECISE"
    assert V2 not in _returned(newer) and V3 not in _returned(older)
    # Excluding both: the keyword matches nothing that may be returned.
    none = _post(
        client, f"{session_id}-c", query="ERR_TIMEOUT", metadata_condition=_condition(("version", ">", 10))
    ).json()
    assert none["found"] is False and none["relevanceLevel"] is None
    details = ToolInvocation.objects.get(session_id=f"{session_id}-c").retrieval_details
    assert details["l0_doc_keys"] == [] and details["l1_candidates"] == []
    assert details["metadata_condition"]["matching_documents"] == 0


@pytest.mark.django_db
def test_a_document_the_condition_excludes_is_neither_withheld_nor_counted_as_sent(
    versioned_corpus, session_id
):
    client = _client()
    older = _condition(("version", "<", 3))
    first = _post(client, session_id, query="ERR_TIMEOUT", metadata_condition=older).json()
    assert first["primary"]["docKey"] == V2
    # The session holds V2; a call that cannot see V2 gets V3 as new content, not DEDUPED.
    second = _post(
        client, session_id, query="ERR_TIMEOUT", metadata_condition=_condition(("version", "=", 3))
    )
    assert second.json()["primary"]["docKey"] == V3 and second.json()["relevanceLevel"] == "PRECISE"
    details = ToolInvocation.objects.filter(session_id=session_id).order_by("id").last().retrieval_details
    assert V2 not in details["withheld_doc_keys"]
    # Asking again within the first condition: what it lets through was sent.
    third = _post(client, session_id, query="ERR_TIMEOUT", metadata_condition=older).json()
    assert third["relevanceLevel"] == "DEDUPED" and _returned(third) == []


# --- L1: vector and lexical candidates ---------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("in_search", [True, False], ids=["filtered-in-search", "filtered-after-fetch"])
def test_on_l1_the_excluded_best_document_is_not_searched_and_the_next_one_answers(
    versioned_corpus, session_id, monkeypatch, in_search
):
    if not in_search:  # a condition passing more documents than a search filter holds
        monkeypatch.setattr(vector_search, "DOC_KEYS_IN_SEARCH_MAX", 0)
    client = _client()
    plain = _post(client, f"{session_id}-a", query="数据库连接池配置", top_k=2).json()
    assert plain["primary"]["docKey"] == POOL
    filtered = _post(
        client,
        f"{session_id}-b",
        query="数据库连接池配置",
        top_k=2,
        metadata_condition=_condition(
            ("status", "is not", "archived"), ("status", "empty", None), logical="or"
        ),
    ).json()
    assert filtered["found"] is True and filtered["primary"]["docKey"] != POOL
    assert POOL not in _returned(filtered)
    details = ToolInvocation.objects.get(session_id=f"{session_id}-b").retrieval_details
    candidates = [c["doc_key"] for c in details["l1_candidates"]]
    # top_k chunks, all of documents the condition lets through.
    assert len(candidates) == 2 and POOL not in candidates
    assert POOL not in details["withheld_doc_keys"]
    assert details["metadata_condition"] == {
        "logical_operator": "or",
        "conditions": [
            {"name": ["status"], "comparison_operator": "is not", "value": "archived"},
            {"name": ["status"], "comparison_operator": "empty", "value": None},
        ],
        "matching_documents": ApiDocument.objects.count() - 1,
    }


# --- REST: with the domains filter -------------------------------------------------------------------
@pytest.mark.django_db
def test_over_rest_domains_and_a_condition_return_only_matching_documents_and_are_recorded(
    versioned_corpus, session_id
):
    client = _client()
    query, domains = "数据库连接池配置", ["infrastructure"]
    plain = _post(client, f"{session_id}-a", query=query, domains=domains).json()
    assert plain["primary"]["docKey"] == POOL
    condition = _condition(("status", "empty", None))  # not archived
    response = _post(client, session_id, query=query, domains=domains, metadata_condition=condition)
    assert response.status_code == 200, response.content
    returned = _returned(response.json())
    assert returned and POOL not in returned
    assert all(key.startswith("infrastructure/") for key in returned)
    invocation = ToolInvocation.objects.get(session_id=session_id)
    assert invocation.request["metadata_condition"] == condition
    # The infrastructure documents but the archived one.
    assert invocation.retrieval_details["metadata_condition"]["matching_documents"] == 3
    # Without a condition the record says so.
    _post(_client(), f"{session_id}-b", query="连接池参数")
    assert (
        ToolInvocation.objects.get(session_id=f"{session_id}-b").retrieval_details["metadata_condition"]
        is None
    )


@pytest.mark.django_db
def test_staff_see_the_condition_on_the_invocation_page(versioned_corpus, session_id, admin_client):
    from django.urls import reverse

    condition = _condition(("version", "≥", 3), ("product", "in", ["gateway", "portal"]))
    _post(_client(), session_id, query="ERR_TIMEOUT", metadata_condition=condition)
    invocation = ToolInvocation.objects.get(session_id=session_id)
    page = admin_client.get(reverse("admin:observability_toolinvocation_change", args=[invocation.pk]))
    assert page.status_code == 200
    shown = page.content.decode().split('id="invocation-condition">', 1)[1].split("</dd>", 1)[0]
    assert shown == "<code>version ≥ 3 and product in gateway, portal · 1 document passed</code>"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("condition", "field"),
    [
        ("version = 3", "metadata_condition"),
        ({"logical_operator": "xor", "conditions": []}, "metadata_condition.logical_operator"),
        ({"conditions": {"name": "version"}}, "metadata_condition.conditions"),
        (
            {"conditions": [{"name": "version", "comparison_operator": "~", "value": 3}]},
            "metadata_condition.conditions[0].comparison_operator",
        ),
        (
            {"conditions": [{"name": "", "comparison_operator": "is", "value": "x"}]},
            "metadata_condition.conditions[0].name",
        ),
        (
            {"conditions": [{"name": "version", "comparison_operator": ">", "value": "three"}]},
            "metadata_condition.conditions[0].value",
        ),
    ],
)
def test_a_malformed_condition_is_a_400_naming_its_field_and_is_recorded(
    versioned_corpus, session_id, condition, field
):
    response = _post(_client(), session_id, query="ERR_TIMEOUT", metadata_condition=condition)
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {field}
    refused = ToolInvocation.objects.get(session_id=session_id)
    assert refused.status == ToolInvocation.Status.ERROR and field in refused.error


@pytest.mark.django_db
def test_an_unknown_field_beside_a_condition_is_still_a_400_naming_it(versioned_corpus, session_id):
    response = _post(
        _client(),
        session_id,
        query="ERR_TIMEOUT",
        metadata_condition=_condition(("version", "=", 3)),
        filter={},
    )
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"filter"}


# --- the cache ---------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_filtered_call_never_reads_an_unfiltered_calls_cached_hits_nor_the_reverse(
    versioned_corpus, session_id
):
    client = _client()
    archived_out = _condition(("status", "is not", "archived"), ("status", "empty", None), logical="or")

    def call(n: int, **body) -> dict:
        _post(client, f"{session_id}-{n}", query="数据库连接池配置", **body)
        return ToolInvocation.objects.get(session_id=f"{session_id}-{n}").retrieval_details

    plain = call(1)
    filtered = call(2, metadata_condition=archived_out)
    other = call(3, metadata_condition=_condition(("domain", "is", "infrastructure")))
    plain_again, filtered_again = call(4), call(5, metadata_condition=archived_out)

    def keys(details: dict) -> set[str]:
        return {c["doc_key"] for c in details["l1_candidates"]}

    assert (plain["l1_cached"], filtered["l1_cached"], other["l1_cached"]) == (False, False, False)
    assert plain_again["l1_cached"] and filtered_again["l1_cached"]
    assert POOL in keys(plain) and POOL in keys(plain_again) and POOL in keys(other)
    assert POOL not in keys(filtered) and POOL not in keys(filtered_again)
    assert all(k.startswith("infrastructure/") for k in keys(other))


@pytest.mark.django_db
def test_a_metadata_edit_moves_a_document_in_or_out_of_the_next_filtered_call(versioned_corpus, session_id):
    client = _client()
    newer = _condition(("version", "≥", 3))
    first = _post(client, f"{session_id}-a", query="ERR_TIMEOUT", metadata_condition=newer).json()
    assert first["primary"]["docKey"] == V3
    # Staff edit the front matter of both (save(): what the admin does): V2 becomes version 4.
    for key, version in ((V2, 4), (V3, 1)):
        document = ApiDocument.objects.get(doc_key=key)
        document.metadata = {**document.metadata, "extra": {"version": version}}
        document.save()
    second = _post(client, f"{session_id}-b", query="ERR_TIMEOUT", metadata_condition=newer).json()
    assert second["primary"]["docKey"] == V2 and V3 not in _returned(second)


@pytest.mark.django_db
def test_l1_search_keys_its_cache_on_the_documents_searched(versioned_corpus):
    signature = corpus_signature()
    everything = l1_search(query="连接池", top_k=3, signature=signature)
    only = l1_search(query="连接池", top_k=3, signature=signature, doc_keys=frozenset({V3}))
    nothing = l1_search(query="连接池", top_k=3, signature=signature, doc_keys=frozenset())
    assert not only.hits_cached and {h.doc_key for h in only.hits} == {V3}
    assert nothing.hits == () and not nothing.hits_cached
    again = l1_search(query="连接池", top_k=3, signature=signature)
    assert again.hits_cached and again.hits == everything.hits


# --- MCP ---------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_over_mcp_domains_and_a_condition_apply_and_a_malformed_one_is_a_tool_error(corpus, live_asgi):  # noqa: F811
    import asyncio
    import json

    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    versioned_documents(corpus)
    token = tool_token_issue(name=f"mcp-cond-{uuid.uuid4().hex[:6]}")
    condition = _condition(("status", "empty", None))

    async def calls():
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {token.key}"}, timeout=30) as http,
            streamable_http_client(live_asgi.mcp_url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            filtered = await session.call_tool(
                "lookup_knowledge",
                {"query": "数据库连接池配置", "domains": ["infrastructure"], "metadata_condition": condition},
            )
            malformed = await session.call_tool(
                "lookup_knowledge",
                {
                    "query": "连接池参数",
                    "metadata_condition": {"conditions": [{"name": "x", "comparison_operator": "~"}]},
                },
            )
            return tools, filtered, malformed

    tools, filtered, malformed = asyncio.run(calls())
    schema = tools["lookup_knowledge"].inputSchema
    assert "metadata_condition" in schema["properties"] and "session_id" not in schema["properties"]
    assert schema["required"] == ["query"]
    assert not filtered.isError, filtered.content
    returned = _returned(json.loads(filtered.content[0].text))
    assert returned and POOL not in returned and all(key.startswith("infrastructure/") for key in returned)
    assert malformed.isError
    assert "metadata_condition.conditions[0].comparison_operator: must be one of" in malformed.content[0].text
    refused = ToolInvocation.objects.filter(status=ToolInvocation.Status.ERROR).get()
    assert "metadata_condition.conditions[0].comparison_operator" in refused.error
