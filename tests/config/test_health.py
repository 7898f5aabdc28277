"""GET /healthz: up/down per part for anyone (agents included); details only for staff."""

import time

import pytest

from knowledge.lexical import get_lexical_engine
from knowledge.vectorstore import reset_vector_store
from retrieval.agents.tokens import tool_token_issue
from tests.conftest import free_port


@pytest.fixture
def vector_store(vector_store):
    """The store connected before /healthz asks it: the first connection to embedded milvus-lite
    starts its server process, longer than HEALTH_TIMEOUT (a process's warm-up does it at start)."""
    vector_store.ping()
    return vector_store


@pytest.mark.django_db
def test_healthz_reports_every_part_up_with_details_for_staff(admin_client, vector_store):
    response = admin_client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok" and body["down"] == []
    assert set(body["checks"]) == {
        "database",
        "vector_store",
        "lexical_index",
        "broker",
        "action_memory",
        "storage",
    }
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
        "action_memory": {"ok": True},
        "storage": {"ok": True},
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
    # Under LEXICAL_ENGINE=auto (or milvus) the lexical engine cannot be chosen while the store
    # does not say what it is; tantivy named outright does not ask the store.
    lexical_down = [] if settings.LEXICAL_ENGINE == "tantivy" else ["lexical_index"]
    assert anonymous.json()["down"] == staff.json()["down"] == ["vector_store", *lexical_down]
    assert anonymous.json()["checks"]["vector_store"] == {"ok": False}
    assert staff.json()["checks"]["vector_store"]["error"]
    assert settings.MILVUS_URI not in anonymous.content.decode()


@pytest.fixture
def hung_redis(settings):
    from tests.support.hung_peer import HungPeer

    peer = HungPeer()
    settings.REDIS_URL = f"redis://127.0.0.1:{peer.port}/0"
    yield peer
    peer.close()


@pytest.mark.django_db
def test_healthz_answers_within_its_bound_naming_a_hung_part_for_every_caller(
    client, admin_client, vector_store, hung_redis, settings
):
    """A part that accepts connections and never answers: /healthz still answers in time."""
    token = tool_token_issue(name="health-probe").key
    settings.HEALTH_TIMEOUT = 0.5
    for caller, extra in (
        (client, {}),
        (client, {"HTTP_AUTHORIZATION": f"Token {token}"}),
        (admin_client, {}),
    ):
        started = time.monotonic()
        response = caller.get("/healthz", **extra)
        assert time.monotonic() - started < 2
        assert response.status_code == 503 and response["Content-Type"] == "application/json"
        assert response.json()["down"] == ["action_memory"]
    assert (
        "no answer within" in response.json()["checks"]["action_memory"]["error"]
        or "Timeout" in (response.json()["checks"]["action_memory"]["error"])
    )


@pytest.mark.django_db
def test_healthz_names_storage_when_the_var_folder_is_short_of_space(client, vector_store, settings):
    settings.HEALTH_MIN_FREE_MB = 10**12  # more than any disk has: the folder is "full"
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["down"] == ["storage"]


@pytest.mark.django_db
def test_healthz_names_storage_when_a_folder_cannot_be_written(
    admin_client, vector_store, settings, tmp_path
):
    not_a_folder = tmp_path / "var"  # (file modes do not stop a root test run from writing)
    not_a_folder.write_text("a file where the var folder should be")
    settings.VAR_DIR = not_a_folder
    response = admin_client.get("/healthz")
    assert response.status_code == 503 and response.json()["down"] == ["storage"]
    assert "NotADirectoryError" in response.json()["checks"]["storage"]["error"]
