"""The retrieval dashboard page: the filters form, the cards, the tables; figures from charts."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import QueryDict
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _

from observability import calibration, charts, selectors, shared_state
from observability.admin.base import PageAdmin
from observability.forms import DashboardFilterForm
from observability.links import agent_params, invocation_list_url, scope
from observability.metrics import DEDUP_REASONS, DIFY_TOOL, LOOKUP_TOOL, RELEVANCE_LEVELS, label_display
from observability.models import RetrievalDashboard, ToolInvocation
from observability.rollups import NO_AGENT


@admin.register(RetrievalDashboard)
class RetrievalDashboardAdmin(PageAdmin):
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
                agents=agent_rows(data=data, filters=filters, params=params),
                # Since the store began counting, not within the filtered range: the counter is one number.
                sessions_evicted=shared_state.sessions_evicted(),
            )
        return TemplateResponse(request, "admin/observability/dashboard.html", context)


def dashboard_links(*, data: dict, filters: selectors.InvocationFilter) -> dict:
    params = scope(filters)
    return {
        "all": invocation_list_url(**params),
        "errors": invocation_list_url(**params, status__exact=ToolInvocation.Status.ERROR),
        "degraded": invocation_list_url(**params, status__exact=ToolInvocation.Status.DEGRADED),
        "levels": [
            {
                **row,
                "label": label_display(row["label"]),
                "url": invocation_list_url(**params, level=row["value"] or "none"),
            }
            for row in data["relevance"]
        ],
        "dedup": [
            {
                **row,
                "label": label_display(row["label"]),
                "url": invocation_list_url(**params, dedup=row["value"] or "none"),
            }
            for row in data["dedup"]
        ],
        "dify_records": invocation_list_url(**{**params, "tool_name": DIFY_TOOL}),
        "not_found": [
            {**row, "url": invocation_list_url(**params, level="none", q=row["query"])}
            for row in data["not_found"]
        ],
    }


def agent_rows(*, data: dict, filters: selectors.InvocationFilter, params: QueryDict) -> list[dict]:
    """The per-agent breakdown as the table shows it: each agent's name links to the dashboard
    narrowed to it, each count to the invocation list filtered to what it counts."""
    level_labels = [label for _, label in RELEVANCE_LEVELS]
    dedup_labels = [(value, label) for value, label in DEDUP_REASONS if value]
    base = {**scope(filters)}
    base.pop("agent__id__exact", None)
    base.pop("agent__isnull", None)
    rows = []
    for row in data["agents"]:
        narrowed = params.copy()
        narrowed["agent"] = str(row["agent"])
        on_list = {**base, **agent_params(row["agent"])}
        rows.append(
            {
                **row,
                "no_agent": row["agent"] == NO_AGENT,
                "dashboard_url": "?" + narrowed.urlencode(),
                "list_url": invocation_list_url(**on_list),
                "errors_url": invocation_list_url(**on_list, status__exact=ToolInvocation.Status.ERROR),
                "levels": [
                    {
                        "count": row["levels"].get(label, 0),
                        "url": invocation_list_url(**on_list, level=value or "none"),
                    }
                    for (value, _), label in zip(RELEVANCE_LEVELS, level_labels, strict=True)
                ],
                "dedup": [
                    {"count": row["dedup"].get(label, 0), "url": invocation_list_url(**on_list, dedup=value)}
                    for value, label in dedup_labels
                ],
            }
        )
    return rows
