import pytest

from knowledge.vectorstore import reset_vector_store
from tests.conftest import free_port


@pytest.mark.django_db
def test_healthz_reports_every_part_up(client, vector_store):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok" and body["down"] == []
    assert set(body["checks"]) == {"database", "vector_store", "broker"}
    assert all(check["ok"] for check in body["checks"].values())


@pytest.mark.django_db
def test_healthz_names_the_vector_store_when_milvus_is_down(client, settings):
    settings.MILVUS_URI = f"http://127.0.0.1:{free_port()}"
    settings.MILVUS_TIMEOUT = 2
    reset_vector_store()
    try:
        response = client.get("/healthz")
    finally:
        reset_vector_store()
    body = response.json()
    assert response.status_code == 503
    assert body["down"] == ["vector_store"]
    assert body["checks"]["vector_store"]["error"]
