from django.contrib import admin
from django.urls import include, path
from django.utils.translation import gettext_lazy as _
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from config.health import healthz
from config.landing import landing
from observability.scrape import metrics

# The staff site is agentkb's, and "View site" opens the API documentation (there is no other site).
admin.site.site_header = _("agentkb administration")
admin.site.site_title = _("agentkb")
admin.site.index_title = _("How agentkb is doing")
admin.site.site_url = "/api/docs/"

urlpatterns = [
    path("", landing, name="landing"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("api/", include("retrieval.urls")),
    path("api/", include("observability.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
]
