"""GET /healthz: up/down per part for anyone (agents included); details only for staff."""

import pytest

from knowledge.lexical import get_lexical_engine
from knowledge.vectorstore import reset_vector_store
from retrieval.agents.tokens import tool_token_issue
from tests.conftest import free_port


@pytest.mark.django_db
def test_healthz_reports_every_part_up_with_details_for_staff(admin_client, vector_store):
    response = admin_client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok" and body["down"] == []
    assert set(body["checks"]) == {"database", "vector_store", "lexical_index", "broker"}
    assert all(check["ok"] and check["detail"] for check in body["checks"].values())
    # The lexical engine in force is named, and why (milvus-lite: tantivy beside it, unless
    # LEXICAL_ENGINE says otherwise).
    engine = get_lexical_engine()
    assert body["checks"]["lexical_index"]["detail"].startswith(f"{engine.name} (")
    # What the Milvus deployment supports (detected once per process) is shown beside it.
    assert body["checks"]["vector_store"]["detail"].endswith(f"; {vector_store.capabilities().summary()}")


@pytest.mark.django_db
def test_anonymous_healthz_answers_only_up_or_down_per_part(client, vector_store, settings):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200
    assert body["checks"] == {
        "database": {"ok": True},
        "vector_store": {"ok": True},
        "lexical_index": {"ok": True},
        "broker": {"ok": True},
    }
    # Nothing about where the parts run: no URI, path or backend name.
    assert settings.MILVUS_URI not in response.content.decode()


@pytest.mark.django_db
def test_a_tool_token_sees_no_details(client, vector_store):
    # An agent is no operator: its token opens no details (tests/security/test_health_secrets.py).
    token = tool_token_issue(name="health-probe").key
    with_token = client.get("/healthz", HTTP_AUTHORIZATION=f"Token {token}").json()
    assert with_token["checks"]["database"] == {"ok": True}
    wrong = client.get("/healthz", HTTP_AUTHORIZATION="Token not-a-token").json()
    assert wrong["checks"]["database"] == {"ok": True}


@pytest.mark.django_db
def test_healthz_names_the_vector_store_when_milvus_is_down(client, admin_client, settings):
    settings.MILVUS_URI = f"http://127.0.0.1:{free_port()}"
    settings.MILVUS_TIMEOUT = 2
    reset_vector_store()
    try:
        anonymous = client.get("/healthz")
        staff = admin_client.get("/healthz")
    finally:
        reset_vector_store()
    assert anonymous.status_code == staff.status_code == 503
    # The lexical engine cannot be chosen while the store does not say what it is.
    assert anonymous.json()["down"] == staff.json()["down"] == ["vector_store", "lexical_index"]
    assert anonymous.json()["checks"]["vector_store"] == {"ok": False}
    assert staff.json()["checks"]["vector_store"]["error"]
    assert settings.MILVUS_URI not in anonymous.content.decode()
