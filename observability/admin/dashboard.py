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
from observability.metrics import DIFY_TOOL, LOOKUP_TOOL
from observability.models import RetrievalDashboard, ToolInvocation


@admin.register(RetrievalDashboard)
class RetrievalDashboardAdmin(_PageAdmin):
    page_name = _("Retrieval dashboard")

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        # Defaults filled in, not left blank: a blank tool would show one tool's data while the
        # dropdown names another (the first choice).
        params = request.GET.copy()
        params.setdefault("range", "24h")
        params.setdefault("tool", LOOKUP_TOOL)
        form = DashboardFilterForm(params)
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
        "dify_records": invocation_list_url(**{**params, "tool_name": DIFY_TOOL}),
        "not_found": [
            {**row, "url": invocation_list_url(**params, level="none", q=row["query"])}
            for row in data["not_found"]
        ],
    }
