"""Admin pages of what happened: the invocation browser (with charts above the list), the
retrieval dashboard, hit testing, feedback and threshold calibration.

Pages are thin: the numbers come from ``observability.selectors`` / ``observability.calibration``,
the figures from ``observability.charts``, writes go through services.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from knowledge.models import KnowledgeDomain
from observability import calibration, charts, selectors
from observability.feedback import feedback_record
from observability.forms import DashboardFilterForm, FeedbackForm, ThresholdApplyForm
from observability.models import (
    HitTest,
    InvocationFeedback,
    RetrievalDashboard,
    ThresholdCalibration,
    ToolInvocation,
)

CHANGELIST = "admin:observability_toolinvocation_changelist"
BUCKETS = {"hour": _("hour"), "day": _("day")}


def invocation_list_url(**params) -> str:
    """The invocation list filtered by ``params`` (the changelist's own filter parameters)."""
    query = {k: v for k, v in params.items() if v is not None and v != ""}
    return reverse(CHANGELIST) + ("?" + urlencode(query) if query else "")


def _iso(moment: datetime) -> str:
    return timezone.localtime(moment).isoformat(timespec="seconds")


# --- changelist filters (their parameters are what the charts link to) -------------------------


class LevelFilter(admin.SimpleListFilter):
    title = _("relevance level")
    parameter_name = "level"

    def lookups(self, request, model_admin):
        return [(value or "none", label) for value, label in selectors.RELEVANCE_LEVELS]

    def queryset(self, request, queryset):
        return queryset.filter(selectors.level_filter_q(self.value())) if self.value() else queryset


class DedupFilter(admin.SimpleListFilter):
    title = _("dedup reason")
    parameter_name = "dedup"

    def lookups(self, request, model_admin):
        return [(value or "none", label) for value, label in selectors.DEDUP_REASONS]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        if self.value() == "none":
            return queryset.filter(dedup_reason__isnull=True)
        return queryset.filter(dedup_reason=self.value())


class DomainFilter(admin.SimpleListFilter):
    title = _("domain (primary result)")
    parameter_name = "domain"

    def lookups(self, request, model_admin):
        domains = list(KnowledgeDomain.objects.values_list("domain_id", flat=True))
        # A domain from a link that has no KnowledgeDomain row still filters (the admin skips a
        # filter without choices).
        if self.value() and self.value() not in domains:
            domains.append(self.value())
        return [(d, d) for d in domains]

    def queryset(self, request, queryset):
        return queryset.filter(primary_domain=self.value()) if self.value() else queryset


class SimilarityFilter(admin.SimpleListFilter):
    """``similarity=lo-hi``: l1_top_similarity in [lo, hi) (hi = 1 includes 1)."""

    title = "l1_top_similarity"
    parameter_name = "similarity"

    def lookups(self, request, model_admin):
        return [
            (f"{i / 10:.1f}-{(i + 1) / 10:.1f}", f"{i / 10:.1f} – {(i + 1) / 10:.1f}")
            for i in range(9, -1, -1)
        ]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        try:
            lo, hi = (float(part) for part in self.value().split("-", 1))
        except ValueError:
            raise admin.options.IncorrectLookupParameters(
                f"similarity: expected lo-hi, e.g. 0.75-0.80, got {self.value()!r}"
            ) from None
        upper = {"l1_top_similarity__lte": hi} if hi >= 1 else {"l1_top_similarity__lt": hi}
        return queryset.filter(l1_top_similarity__gte=lo, **upper)


class TimeRangeFilter(admin.SimpleListFilter):
    """``from`` / ``to`` (ISO datetimes): the dashboard's time range, carried into the list."""

    title = _("time range (from dashboard)")
    parameter_name = "from"

    def __init__(self, request, params, model, model_admin):
        self.until = params.pop("to", [None])[-1]
        super().__init__(request, params, model, model_admin)
        if self.until is not None:
            self.used_parameters["to"] = self.until

    def has_output(self):
        return bool(self.value() or self.until)

    def lookups(self, request, model_admin):
        return (
            [(self.value(), gettext("since %(moment)s") % {"moment": self.value()})] if self.value() else []
        )

    def expected_parameters(self):
        return ["from", "to"]

    def queryset(self, request, queryset):
        try:
            if self.value():
                queryset = queryset.filter(created_at__gte=datetime.fromisoformat(self.value()))
            if self.until:
                queryset = queryset.filter(created_at__lt=datetime.fromisoformat(self.until))
        except ValueError:
            raise admin.options.IncorrectLookupParameters("from/to: expected ISO datetimes") from None
        return queryset


# --- the invocation browser --------------------------------------------------------------------


class ReadOnlyAdminMixin:
    """Nobody adds, edits or deletes through this entry: it is a record, or a page."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ToolInvocation)
class ToolInvocationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Invocations are a record of what happened: staff read them, nobody edits them."""

    list_display = (
        "created_at",
        "tool_name",
        "session_id",
        "query",
        "status",
        "relevance_level",
        "dedup_reason",
        "similarity",
        "duration_ms",
    )
    list_filter = (
        LevelFilter,
        DedupFilter,
        "status",
        DomainFilter,
        ("created_at", admin.DateFieldListFilter),
        TimeRangeFilter,
        SimilarityFilter,
        "tool_name",
    )
    search_fields = ("session_id", "request__query")
    search_help_text = _("Search by session id or query text.")
    # No date_hierarchy: its MIN/MAX and DISTINCT-dates queries read every listed row (seconds
    # over a filtered million); the created_at filter and the dashboard's from/to cover dates.
    # COUNT(*) over a million rows on every page view costs more than it tells.
    show_full_result_count = False
    list_per_page = 50
    change_list_template = "admin/observability/toolinvocation/change_list.html"
    change_form_template = "admin/observability/toolinvocation/change_form.html"
    fieldsets = (
        (None, {"fields": ("created_at", "tool_name", "session_id", "status", "duration_ms", "error")}),
        (_("Result"), {"fields": ("relevance_level", "dedup_reason", "l1_top_similarity", "primary_domain")}),
        (_("Raw record"), {"fields": ("request_pretty", "result_summary", "retrieval_details_pretty")}),
    )
    readonly_fields = ("request_pretty", "retrieval_details_pretty")

    @admin.display(description=_("query"))
    def query(self, obj: ToolInvocation) -> str:
        text = (obj.request or {}).get("query", "") if isinstance(obj.request, dict) else ""
        return text if len(text) <= 60 else text[:57] + "…"

    @admin.display(description=_("similarity"), ordering="l1_top_similarity")
    def similarity(self, obj: ToolInvocation) -> str:
        return "" if obj.l1_top_similarity is None else f"{obj.l1_top_similarity:.3f}"

    @admin.display(description=_("request"))
    def request_pretty(self, obj: ToolInvocation) -> str:
        return format_html(
            "<pre class='okb-json'>{}</pre>", json.dumps(obj.request, ensure_ascii=False, indent=2)
        )

    @admin.display(description="retrieval_details")
    def retrieval_details_pretty(self, obj: ToolInvocation) -> str:
        return format_html(
            "<pre class='okb-json'>{}</pre>", json.dumps(obj.retrieval_details, ensure_ascii=False, indent=2)
        )

    def get_urls(self):
        extra = [
            path(
                "<int:object_id>/feedback/",
                self.admin_site.admin_view(self.feedback_view),
                name="observability_toolinvocation_feedback",
            ),
        ]
        return extra + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if not context or "cl" not in context:
            return response  # a redirect or an error page
        cl = context["cl"]
        qs = cl.queryset

        def link(param: str):
            def to(value):
                return cl.get_query_string({param: value or "none"}, remove=["p"])

            return to

        filters = _rollup_filters(cl)
        if filters is None:  # a search or a filter the rollups do not hold: count the rows
            relevance, dedup = selectors.level_and_dedup_distributions(qs=qs)
        else:
            facts = selectors.invocation_facts(filters=filters, levels_only=True)
            relevance, dedup = selectors.relevance_from_facts(facts), selectors.dedup_from_facts(facts)
        context["figures"] = {
            "chart-relevance": charts.distribution_figure(
                rows=relevance,
                title=gettext("Relevance level distribution"),
                colours=charts.LEVEL_COLOURS,
                link=link("level"),
            ),
            "chart-dedup": charts.distribution_figure(
                rows=dedup,
                title=gettext("Dedup reason distribution"),
                colours=charts.DEDUP_COLOURS,
                link=link("dedup"),
            ),
        }
        context["dashboard_url"] = reverse("admin:observability_retrievaldashboard_changelist")
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, admin.utils.unquote(object_id))
        extra_context = extra_context or {}
        if obj is not None:
            details = obj.retrieval_details if isinstance(obj.retrieval_details, dict) else {}
            extra_context.update(
                details=details,
                l1_rows=_l1_rows(details),
                feedback=list(obj.feedback.select_related("user")),
                my_feedback=obj.feedback.filter(user=request.user).first(),
                feedback_url=reverse("admin:observability_toolinvocation_feedback", args=[obj.pk]),
                query_text=(obj.request or {}).get("query", "") if isinstance(obj.request, dict) else "",
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def feedback_view(self, request: HttpRequest, object_id: int):
        """The thumbs on the detail page: staff judge whether the result helped."""
        if request.method != "POST":
            return HttpResponseRedirect(
                reverse("admin:observability_toolinvocation_change", args=[object_id])
            )
        if not self.has_view_permission(request):
            raise PermissionDenied
        invocation = get_object_or_404(ToolInvocation, pk=object_id)
        form = FeedbackForm(request.POST)
        if form.is_valid():
            try:
                _, created = feedback_record(
                    invocation_id=invocation.pk,
                    helpful=form.cleaned_data["helpful"],
                    comment=form.cleaned_data["comment"],
                    user=request.user,
                    source=InvocationFeedback.Source.STAFF,
                )
            except ValidationError as exc:
                messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items()))
            else:
                verdict = gettext("helpful") if form.cleaned_data["helpful"] else gettext("not helpful")
                text = (
                    gettext("Recorded: %(verdict)s.")
                    if created
                    else gettext("Recorded: %(verdict)s (replaces your earlier judgement).")
                )
                messages.success(request, text % {"verdict": verdict})
        else:
            messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return HttpResponseRedirect(
            reverse("admin:observability_toolinvocation_change", args=[invocation.pk])
        )


# The list filters the daily rollups can answer (their columns); anything else counts rows.
ROLLUP_LIST_PARAMS = {"level", "dedup", "status__exact", "domain", "tool_name", "from", "to"} | {
    "created_at__gte",
    "created_at__lt",
}


def _moment(value: str | None) -> datetime | None:
    from django.utils.dateparse import parse_date, parse_datetime

    if not value:
        return None
    try:
        moment = parse_datetime(value)
        if moment is None:
            day = parse_date(value)
            moment = datetime.combine(day, datetime.min.time()) if day else None
    except ValueError:
        return None
    if moment is not None and timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


def _rollup_filters(cl) -> selectors.InvocationFilter | None:
    """The list's filters as an InvocationFilter, when the rollups can answer them all.

    Over a million rows the charts above the list would otherwise count every row on each page
    view; with only these filters they read ended days from the daily rollups."""
    params = {k: (v[-1] if isinstance(v, list) else v) for k, v in cl.get_filters_params().items()}
    if cl.query or set(params) - ROLLUP_LIST_PARAMS:
        return None
    starts = [_moment(params.get(p)) for p in ("from", "created_at__gte") if params.get(p)]
    ends = [_moment(params.get(p)) for p in ("to", "created_at__lt") if params.get(p)]
    if None in starts or None in ends:
        return None
    # No bound: the first and last recorded call (two reads of the created_at index).
    bounds = ToolInvocation.objects.order_by("created_at").values_list("created_at", flat=True)
    start = max(starts) if starts else bounds.first()
    end = min(ends) if ends else (bounds.last() or timezone.now()) + timedelta(microseconds=1)
    if start is None or start >= end:
        return None
    return selectors.InvocationFilter(
        start=start,
        end=end,
        tool_name=params.get("tool_name") or None,
        domain=params.get("domain") or None,
        level=params.get("level") or None,
        dedup=params.get("dedup") or None,
        status=params.get("status__exact") or None,
    )


def _l1_rows(details: dict) -> list[dict]:
    """The L1 candidates of a record as rows: raw score and the similarity it normalises to."""
    from django.conf import settings

    max_l2 = float(settings.RETRIEVAL_MAX_L2_DISTANCE)
    rows = []
    for i, score in enumerate(details.get("l1_scores") or []):
        if not isinstance(score, int | float):
            continue
        similarity = 1 - min(max(float(score), 0.0), max_l2) / max_l2
        rows.append({"rank": i + 1, "score": round(float(score), 4), "similarity": round(similarity, 4)})
    return rows


# --- the dashboard -----------------------------------------------------------------------------


class _PageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """An admin entry that is one page (no list, no objects): listed on the admin index."""

    page_name = ""

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path("", self.admin_site.admin_view(self.changelist_view), name=f"{info[0]}_{info[1]}_changelist")
        ]

    def page_context(self, request, **extra) -> dict:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": self.page_name,
            "invocations_url": reverse(CHANGELIST),
            "dashboard_url": reverse("admin:observability_retrievaldashboard_changelist"),
            "calibration_url": reverse("admin:observability_thresholdcalibration_changelist"),
            "hit_testing_url": reverse("admin:observability_hittest_changelist"),
            **extra,
        }


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
                figures=dashboard_figures(data=data, filters=filters, thresholds=thresholds),
                links=dashboard_links(data=data, filters=filters),
            )
        return TemplateResponse(request, "admin/observability/dashboard.html", context)


def _scope(filters: selectors.InvocationFilter) -> dict:
    """The list parameters that reproduce the dashboard's time range, tool and domain."""
    return {
        "from": _iso(filters.start),
        "to": _iso(filters.end),
        "tool_name": filters.tool_name,
        "domain": filters.domain,
    }


def dashboard_figures(*, data: dict, filters: selectors.InvocationFilter, thresholds) -> dict:
    scope = _scope(filters)

    def by(param: str):
        return lambda value: invocation_list_url(**scope, **{param: value or "none"})

    def similarity_link(lo: float, hi: float) -> str:
        return invocation_list_url(**scope, similarity=f"{lo:.2f}-{hi:.2f}")

    def bucket_link(param: str):
        def to(value, x: str, bucket: str) -> str:
            fmt = "%Y-%m-%d %H:%M" if bucket == "hour" else "%Y-%m-%d"
            start = datetime.strptime(x, fmt).replace(tzinfo=timezone.get_current_timezone())
            end = start + (timedelta(hours=1) if bucket == "hour" else timedelta(days=1))
            return invocation_list_url(
                **{**scope, "from": _iso(max(start, filters.start)), "to": _iso(min(end, filters.end))},
                **{param: value or "none"},
            )

        return to

    level_values = {label: value for value, label in selectors.RELEVANCE_LEVELS}
    dedup_values = {label: value for value, label in selectors.DEDUP_REASONS}
    return {
        "chart-relevance": charts.distribution_figure(
            rows=data["relevance"],
            title=gettext("Relevance level distribution"),
            colours=charts.LEVEL_COLOURS,
            link=by("level"),
        ),
        "chart-dedup": charts.distribution_figure(
            rows=data["dedup"],
            title=gettext("Dedup reason distribution"),
            colours=charts.DEDUP_COLOURS,
            link=by("dedup"),
        ),
        "chart-similarity": charts.similarity_figure(
            histogram=data["similarity"],
            reference=thresholds.reference,
            highly_relevant=thresholds.highly_relevant,
            title=gettext("l1_top_similarity distribution"),
            link=similarity_link,
        ),
        "chart-relevance-time": charts.over_time_figure(
            over_time=data["relevance_over_time"],
            title=gettext("Relevance level per %(bucket)s")
            % {"bucket": BUCKETS.get(filters.bucket, filters.bucket)},
            colours=charts.LEVEL_COLOURS,
            values=level_values,
            link=bucket_link("level"),
        ),
        "chart-dedup-time": charts.over_time_figure(
            over_time=data["dedup_over_time"],
            title=gettext("Dedup reason per %(bucket)s")
            % {"bucket": BUCKETS.get(filters.bucket, filters.bucket)},
            colours=charts.DEDUP_COLOURS,
            values=dedup_values,
            link=bucket_link("dedup"),
        ),
        "chart-sessions": charts.sessions_figure(
            sessions=data["sessions"], title=gettext("Calls per session")
        ),
    }


def dashboard_links(*, data: dict, filters: selectors.InvocationFilter) -> dict:
    scope = _scope(filters)
    return {
        "all": invocation_list_url(**scope),
        "errors": invocation_list_url(**scope, status__exact=ToolInvocation.Status.ERROR),
        "degraded": invocation_list_url(**scope, status__exact=ToolInvocation.Status.DEGRADED),
        "levels": [
            {**row, "url": invocation_list_url(**scope, level=row["value"] or "none")}
            for row in data["relevance"]
        ],
        "dedup": [
            {**row, "url": invocation_list_url(**scope, dedup=row["value"] or "none")}
            for row in data["dedup"]
        ],
        "not_found": [
            {**row, "url": invocation_list_url(**scope, level="none", q=row["query"])}
            for row in data["not_found"]
        ],
    }


# --- hit testing -------------------------------------------------------------------------------


@admin.register(HitTest)
class HitTestAdmin(_PageAdmin):
    page_name = _("Hit testing")

    def changelist_view(self, request, extra_context=None):
        from observability.hit_testing import hit_test_page

        if not self.has_view_permission(request):
            raise PermissionDenied
        return hit_test_page(request, self.page_context(request))


# --- feedback and calibration ------------------------------------------------------------------


@admin.register(InvocationFeedback)
class InvocationFeedbackAdmin(admin.ModelAdmin):
    list_display = ("updated_at", "invocation_link", "helpful", "source", "user", "similarity", "comment")
    list_filter = ("helpful", "source")
    list_select_related = ("invocation", "user")
    search_fields = ("comment", "invocation__session_id")

    @admin.display(description=_("invocation"))
    def invocation_link(self, obj: InvocationFeedback) -> str:
        url = reverse("admin:observability_toolinvocation_change", args=[obj.invocation_id])
        return format_html('<a href="{}">#{}</a>', url, obj.invocation_id)

    @admin.display(description=_("similarity"))
    def similarity(self, obj: InvocationFeedback) -> str:
        value = obj.invocation.l1_top_similarity
        return "" if value is None else f"{value:.3f}"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ThresholdCalibration)
class ThresholdCalibrationAdmin(_PageAdmin):
    page_name = _("Threshold calibration")

    def get_urls(self):
        return [
            path(
                "apply/",
                self.admin_site.admin_view(require_POST(self.apply_view)),
                name="observability_calibration_apply",
            ),
            path(
                "revert/",
                self.admin_site.admin_view(require_POST(self.revert_view)),
                name="observability_calibration_revert",
            ),
            path(
                "unjudged/",
                self.admin_site.admin_view(self.unjudged_view),
                name="observability_calibration_unjudged",
            ),
            *super().get_urls(),
        ]

    def has_apply_permission(self, request) -> bool:
        # Applying changes what every lookup returns: superusers, or staff given the add permission.
        return (
            request.user.is_active
            and request.user.is_staff
            and (request.user.is_superuser or request.user.has_perm("observability.add_thresholdcalibration"))
        )

    def _context(self, request, apply_form=None) -> dict:
        vote_filter = calibration.vote_filter_from(request.GET)
        overview = calibration.calibration_overview(vote_filter)
        current, bands, suggestion = overview["current"], overview["bands"], overview["suggestion"]
        if apply_form is None:
            apply_form = ThresholdApplyForm(
                initial={
                    "reference_threshold": suggestion["reference"] if suggestion["ok"] else current.reference,
                    "highly_relevant_threshold": suggestion["highly_relevant"]
                    if suggestion["ok"]
                    else current.highly_relevant,
                }
            )
        shown = (
            (suggestion["reference"], suggestion["highly_relevant"])
            if suggestion["ok"]
            else (current.reference, current.highly_relevant)
        )
        return self.page_context(
            request,
            current=current,
            bands=bands,
            suggestion=suggestion,
            apply_form=apply_form,
            can_apply=self.has_apply_permission(request) and overview["appliable"],
            overview=overview,
            vote_filter=vote_filter,
            query_string=request.GET.urlencode(),
            unjudged_url=reverse("admin:observability_calibration_unjudged") + f"?tool={vote_filter.tool}",
            history=ThresholdCalibration.objects.select_related("applied_by")[:20],
            figures={
                "chart-calibration": charts.calibration_figure(
                    bands=bands["bands"],
                    reference=shown[0],
                    highly_relevant=shown[1],
                    title=gettext("Helpful rate by similarity"),
                )
            },
        )

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return TemplateResponse(request, "admin/observability/calibration.html", self._context(request))

    def apply_view(self, request):
        vote_filter = calibration.vote_filter_from(request.GET)
        if not self.has_apply_permission(request) or vote_filter.tool != calibration.LOOKUP_TOOL:
            raise PermissionDenied  # and only the lookup's votes set the lookup's thresholds
        form = ThresholdApplyForm(request.POST)
        if not form.is_valid():
            return TemplateResponse(
                request,
                "admin/observability/calibration.html",
                self._context(request, apply_form=form),
                status=400,
            )
        bands = calibration.calibration_bands(vote_filter)
        evidence = calibration.calibration_suggest(bands=bands, current=calibration.thresholds_in_force())
        evidence["bands"], evidence["by_source"] = bands["bands"], bands["by_source"]
        evidence["by_agent"], evidence["filter"] = bands["by_agent"], bands["filter"]
        applied = calibration.calibration_apply(
            highly_relevant_threshold=form.cleaned_data["highly_relevant_threshold"],
            reference_threshold=form.cleaned_data["reference_threshold"],
            applied_by=request.user,
            evidence=evidence,
            note=form.cleaned_data["note"],
        )
        messages.success(
            request,
            gettext(
                "Applied REFERENCE ≥ %(reference).3f, HIGHLY_RELEVANT ≥ %(highly_relevant).3f: "
                "lookups use them within seconds."
            )
            % {
                "reference": applied.reference_threshold,
                "highly_relevant": applied.highly_relevant_threshold,
            },
        )
        return HttpResponseRedirect(reverse("admin:observability_thresholdcalibration_changelist"))

    def unjudged_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        vote_filter = calibration.vote_filter_from(request.GET)
        context = self.page_context(
            request,
            title=gettext("Recent calls nobody judged yet"),
            tool=vote_filter.tool,
            invocations=calibration.unjudged_invocations(tool=vote_filter.tool),
        )
        return TemplateResponse(request, "admin/observability/calibration_unjudged.html", context)

    def revert_view(self, request):
        if not self.has_apply_permission(request):
            raise PermissionDenied
        calibration.calibration_revert(applied_by=request.user, note=request.POST.get("note", "")[:500])
        messages.success(request, gettext("Thresholds handed back to the RETRIEVAL_* settings."))
        return HttpResponseRedirect(reverse("admin:observability_thresholdcalibration_changelist"))
