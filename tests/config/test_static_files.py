"""Static files: compressed, cached for a year under hashed names after collectstatic, and
plotly.js only on pages that draw a chart."""

from __future__ import annotations

import gzip

import pytest
from django.core.management import call_command
from django.urls import reverse


@pytest.mark.django_db
def test_collected_plotly_is_served_gzipped_with_a_year_of_cache(tmp_path, settings):
    settings.STATIC_ROOT = str(tmp_path / "static")
    call_command("collectstatic", interactive=False, verbosity=0)
    from django.test import RequestFactory
    from whitenoise.middleware import WhiteNoiseMiddleware

    from config.staticfiles import StaticStorage

    name = StaticStorage().stored_name("observability/vendor/plotly.min.js")
    assert name != "observability/vendor/plotly.min.js"  # hashed
    settings.WHITENOISE_USE_FINDERS = False
    middleware = WhiteNoiseMiddleware(get_response=lambda request: None)
    response = middleware(RequestFactory().get(f"/static/{name}", HTTP_ACCEPT_ENCODING="gzip, deflate"))
    assert response.status_code == 200
    assert response.headers["Content-Encoding"] == "gzip"
    assert "max-age=315360000" in response.headers["Cache-Control"]
    assert "immutable" in response.headers["Cache-Control"]
    body = b"".join(response.streaming_content) if response.streaming else response.content
    raw = (tmp_path / "static" / "observability" / "vendor" / "plotly.min.js").stat().st_size
    assert len(body) < raw / 2 and gzip.decompress(body)[:20]


@pytest.mark.django_db
def test_plotly_only_where_a_chart_is_drawn(admin_client):
    from observability.models import ToolInvocation

    invocation = ToolInvocation.objects.create(
        tool_name="lookup_knowledge", session_id="s", request={"query": "q"}
    )
    plotly = "observability/vendor/plotly.min.js"
    assert (
        plotly
        in admin_client.get(reverse("admin:observability_retrievaldashboard_changelist")).content.decode()
    )
    page = admin_client.get(reverse("admin:observability_toolinvocation_change", args=[invocation.pk]))
    assert page.status_code == 200 and plotly not in page.content.decode()
    assert plotly not in admin_client.get(reverse("admin:index")).content.decode()
