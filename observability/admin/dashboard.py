"""The retrieval dashboard page: the filters form, the cards, the tables; figures from charts."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _

from observability import calibration, charts, selectors
from observability.admin.base import _PageAdmin
from observability.forms import DashboardFilterForm
from observability.links import invocation_list_url, scope
from observability.models import RetrievalDashboard, ToolInvocation


@admin.register(RetrievalDashboard)
class RetrievalDashboardAdmin(_PageAdmin):
    page_name = _("Retrieval dashboard")

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = DashboardFilterForm(request.GET or {"range": "24h"})
        context = self.page_context(request, form=form)
        if form.is_valid():
            filters = form.filters()
            data = selectors.dashboard_data(filters=filters)
            thresholds = calibration.thresholds_in_force()
            context.update(
                filters=filters,
                data=data,
                thresholds=thresholds,
                figures=charts.dashboard_figures(data=data, filters=filters, thresholds=thresholds),
                links=dashboard_links(data=data, filters=filters),
            )
        return TemplateResponse(request, "admin/observability/dashboard.html", context)


def dashboard_links(*, data: dict, filters: selectors.InvocationFilter) -> dict:
    params = scope(filters)
    return {
        "all": invocation_list_url(**params),
        "errors": invocation_list_url(**params, status__exact=ToolInvocation.Status.ERROR),
        "degraded": invocation_list_url(**params, status__exact=ToolInvocation.Status.DEGRADED),
        "levels": [
            {**row, "url": invocation_list_url(**params, level=row["value"] or "none")}
            for row in data["relevance"]
        ],
        "dedup": [
            {**row, "url": invocation_list_url(**params, dedup=row["value"] or "none")}
            for row in data["dedup"]
        ],
        "not_found": [
            {**row, "url": invocation_list_url(**params, level="none", q=row["query"])}
            for row in data["not_found"]
        ],
    }
