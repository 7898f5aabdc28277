import pytest


@pytest.mark.django_db
def test_openapi_schema_is_served(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert b"openapi" in response.content


@pytest.mark.django_db
def test_swagger_ui_is_served_without_any_cdn(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    # Assets come from the sidecar package through our own static files.
    assert "cdn" not in html.lower() and "unpkg" not in html.lower()
    assert "/static/drf_spectacular_sidecar/" in html
