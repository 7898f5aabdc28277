"""`/` is a small page linking the admin, the API documentation and the health check (it was a
404 for whoever opened the address `make run` printed)."""

import pytest
from django.urls import reverse


@pytest.mark.django_db
def test_the_root_links_the_admin_the_api_docs_and_health(client, django_assert_num_queries):
    with django_assert_num_queries(0):  # static: no database, no login
        response = client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    for url in (reverse("admin:index"), reverse("swagger-ui"), reverse("healthz"), reverse("schema")):
        assert f'href="{url}"' in page
    assert "/mcp/" in page


@pytest.mark.django_db
def test_every_link_on_the_root_page_answers(admin_client):
    import re

    page = admin_client.get("/").content.decode()
    links = re.findall(r'href="(/[^"]*)"', page)
    assert len(links) >= 5
    for url in links:
        assert admin_client.get(url).status_code in (200, 503), url  # /healthz may say a part is down


def test_the_root_answers_in_chinese(client):
    page = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "管理" in page


def test_the_root_takes_no_posts(client):
    assert client.post("/").status_code == 405
