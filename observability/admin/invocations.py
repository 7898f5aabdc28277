"""The invocation browser: the list (with charts above it) and one invocation's page."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from config.credentials import mask_credentials
from config.display import (
    clipped,
    display_clean,
    display_json,
    display_text,
    request_query,
    spreadsheet_safe,
)
from observability import charts, selectors
from observability.admin.base import ReadOnlyAdminMixin
from observability.admin.filters import (
    DedupFilter,
    DomainFilter,
    LevelFilter,
    SimilarityFilter,
    TimeRangeFilter,
)
from observability.explain import evidence_text, level_explanation, thresholds_source
from observability.feedback import feedback_record
from observability.forms import FeedbackForm
from observability.links import iso
from observability.metrics import DIFY_TOOL
from observability.models import InvocationFeedback, ToolInvocation
from observability.rollups import NO_AGENT


@admin.register(ToolInvocation)
class ToolInvocationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Invocations are a record of what happened: staff read them, nobody edits them."""

    # Level and similarity first: at 1440 px with the sidebar open they are what a reader scans.
    list_display = (
        "level",
        "similarity",
        "query",
        "dedup",
        "tool_name",
        "session",
        "status",
        "duration_ms",
        "created_at",
    )
    list_display_links = ("query", "created_at")
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
    # Level, dedup reason and similarity are in the readable summary above: not repeated here.
    fieldsets = (
        (
            None,
            {"fields": ("created_at", "tool_name", "session_shown", "status", "duration_ms", "error_shown")},
        ),
        (_("Raw record"), {"fields": ("request_pretty", "summary_shown", "retrieval_details_pretty")}),
    )
    readonly_fields = (
        "session_shown",
        "error_shown",
        "summary_shown",
        "request_pretty",
        "retrieval_details_pretty",
    )

    @admin.display(description=_("query"))
    def query(self, obj: ToolInvocation) -> str:
        return clipped(request_query(obj.request), 48, empty=gettext("(no query)"))

    @admin.display(description=_("relevance level"), ordering="relevance_level")
    def level(self, obj: ToolInvocation) -> str:
        return level_badge(obj)

    @admin.display(description=_("dedup reason"), ordering="dedup_reason")
    def dedup(self, obj: ToolInvocation) -> str:
        return obj.dedup_reason or format_html('<span class="okb-muted">{}</span>', gettext("none"))

    @admin.display(description=_("session"), ordering="session_id")
    def session(self, obj: ToolInvocation) -> str:
        return clipped(obj.session_id, 14)

    @admin.display(description=_("session"))
    def session_shown(self, obj: ToolInvocation) -> str:
        return clipped(obj.session_id, 80)

    @admin.display(description=_("error"))
    def error_shown(self, obj: ToolInvocation) -> str:
        # Masked again on the page: rows recorded before errors were masked when written.
        error = mask_credentials(display_text(obj.error))
        return format_html("<pre class='okb-json'>{}</pre>", error) if obj.error else "–"

    @admin.display(description=_("result summary"))
    def summary_shown(self, obj: ToolInvocation) -> str:
        return format_html("<pre class='okb-json'>{}</pre>", display_text(obj.result_summary))

    @admin.display(description=_("similarity"), ordering="l1_top_similarity")
    def similarity(self, obj: ToolInvocation) -> str:
        return "–" if obj.l1_top_similarity is None else f"{obj.l1_top_similarity:.3f}"

    @admin.display(description=_("request"))
    def request_pretty(self, obj: ToolInvocation) -> str:
        return format_html("<pre class='okb-json'>{}</pre>", display_json(obj.request))

    @admin.display(description="retrieval_details")
    def retrieval_details_pretty(self, obj: ToolInvocation) -> str:
        return format_html("<pre class='okb-json'>{}</pre>", display_json(obj.retrieval_details))

    def get_urls(self):
        extra = [
            path(
                "<int:object_id>/feedback/",
                self.admin_site.admin_view(self.feedback_view),
                name="observability_toolinvocation_feedback",
            ),
        ]
        extra.append(
            path(
                "export.csv",
                self.admin_site.admin_view(self.export_csv_view),
                name="observability_toolinvocation_export",
            )
        )
        return extra + super().get_urls()

    def export_csv_view(self, request: HttpRequest):
        """The list as filtered (same filters and search), as CSV, newest first, at most
        EXPORT_ROWS rows, streamed. Every cell is ``spreadsheet_safe``: a query an agent wrote as
        ``=HYPERLINK(...)`` opens as text, not as a formula."""
        import csv

        from django.http import StreamingHttpResponse

        if not self.has_view_permission(request):
            raise PermissionDenied
        queryset = self.get_changelist_instance(request).get_queryset(request)

        class Echo:
            def write(self, value):
                return value

        writer = csv.writer(Echo())
        header = ["id", "created_at", "tool_name", "session_id", "query", "status", "relevance_level"]
        header += ["dedup_reason", "l1_top_similarity", "duration_ms"]

        def rows():
            yield writer.writerow(header)
            for obj in queryset.order_by("-created_at", "-pk")[:EXPORT_ROWS].iterator(chunk_size=2000):
                yield writer.writerow(
                    spreadsheet_safe(cell)
                    for cell in [
                        obj.pk,
                        iso(obj.created_at),
                        obj.tool_name,
                        display_text(obj.session_id),
                        display_text(request_query(obj.request)),
                        obj.status,
                        obj.relevance_level or "",
                        obj.dedup_reason or "",
                        "" if obj.l1_top_similarity is None else f"{obj.l1_top_similarity:.4f}",
                        obj.duration_ms,
                    ]
                )

        response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="tool-invocations.csv"'
        return response

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
        query = request.GET.urlencode()
        context["csv_url"] = reverse("admin:observability_toolinvocation_export") + (
            f"?{query}" if query else ""
        )
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, admin.utils.unquote(object_id))
        extra_context = extra_context or {}
        if obj is not None:
            details = display_clean(obj.retrieval_details) if isinstance(obj.retrieval_details, dict) else {}
            l1_rows = _l1_rows(details)
            doc_links = _document_links(l1_rows, details)
            for row in l1_rows:
                row["url"] = doc_links.get(row.get("doc_key") or "")
            previous, following = _session_neighbours(obj)
            extra_context.update(
                details=details,
                l1_rows=l1_rows,
                doc_links=[
                    {"key": key, "url": doc_links.get(key), "mark": mark}
                    for mark, name in (("returned", "returned_doc_keys"), ("withheld", "withheld_doc_keys"))
                    for key in (details.get(name) if isinstance(details.get(name), list) else [])
                    if isinstance(key, str)
                ],
                explanation=level_explanation(
                    tool_name=obj.tool_name, status=obj.status, level=obj.relevance_level, details=details
                ),
                thresholds_source=thresholds_source(details),
                previous_call=previous,
                next_call=following,
                feedback=list(obj.feedback.select_related("user")),
                my_feedback=obj.feedback.filter(user=request.user).first(),
                feedback_url=reverse("admin:observability_toolinvocation_feedback", args=[obj.pk]),
                query_text=display_text(request_query(obj.request)),
                condition_text=condition_text(details),
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
    # The agent (the dashboard's links carry it): rollup rows keep it.
    "agent__id__exact",
    "agent__isnull",
}


def _agent(params: dict) -> tuple[bool, int | None]:
    """(understood, the InvocationFilter's agent) of the list's agent parameters."""
    if "agent__id__exact" in params:
        value = params["agent__id__exact"]
        return (value.isdigit() and int(value) > 0, int(value) if value.isdigit() else None)
    if "agent__isnull" in params:
        return (params["agent__isnull"] == "True", NO_AGENT)
    return True, None


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
    understood, agent = _agent(params)
    if not understood or ("agent__id__exact" in params and "agent__isnull" in params):
        return None
    return selectors.InvocationFilter(
        start=start,
        end=end,
        tool_name=params.get("tool_name") or None,
        domain=params.get("domain") or None,
        level=params.get("level") or None,
        dedup=params.get("dedup") or None,
        status=params.get("status__exact") or None,
        agent=agent,
    )


# The CSV export's cap: a filtered list is what it is for, not a dump of the table.
EXPORT_ROWS = 100_000


def level_badge(obj: ToolInvocation) -> str:
    """The level as a coloured badge; no level is "not found" (one name everywhere), or "error"."""
    if obj.tool_name == DIFY_TOOL and obj.status != ToolInvocation.Status.ERROR:
        # Dify calls have no level: their outcome is whether records came back.
        keys = (
            obj.retrieval_details.get("returned_doc_keys")
            if isinstance(obj.retrieval_details, dict)
            else None
        )
        if isinstance(keys, list) and keys:
            return format_html('<span class="okb-mark okb-returned">{}</span>', gettext("Dify: records"))
        return format_html('<span class="okb-mark okb-withheld">{}</span>', gettext("Dify: no records"))
    if obj.relevance_level:
        return format_html(
            '<span class="okb-level okb-level-{}">{}</span>', obj.relevance_level, obj.relevance_level
        )
    if obj.status == ToolInvocation.Status.ERROR:
        return format_html('<span class="okb-muted">{}</span>', gettext("error"))
    return format_html('<span class="okb-level okb-level-none">{}</span>', gettext("not found"))


def _condition_value(value) -> str:
    # Numbers are parsed to floats: 3.0 reads as the 3 the agent sent.
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def condition_text(details: dict) -> str:
    """The call's metadata condition in one line ("version ≥ 3 and status empty · 4 documents
    passed"); "" when the call set none."""
    condition = details.get("metadata_condition")
    if not isinstance(condition, dict):
        return ""
    parts = []
    for item in condition.get("conditions") or []:
        if not isinstance(item, dict):
            continue
        names = item.get("name")
        name = "/".join(str(n) for n in names) if isinstance(names, list) else str(names)
        value = item.get("value")
        values = value if isinstance(value, list) else [] if value is None else [value]
        shown = ", ".join(_condition_value(v) for v in values)
        parts.append(" ".join(p for p in (name, str(item.get("comparison_operator") or ""), shown) if p))
    text = f" {condition.get('logical_operator') or 'and'} ".join(parts) or gettext("no condition in force")
    passed = condition.get("matching_documents")
    if isinstance(passed, int):
        text += " · " + ngettext("%(count)d document passed", "%(count)d documents passed", passed) % {
            "count": passed
        }
    return text


def _l1_rows(details: dict) -> list[dict]:
    """The L1 candidates of a record as rows: document, title, chunk, raw score, similarity and
    whether it was returned or withheld (older records hold only ``l1_scores``)."""
    from django.conf import settings

    returned = details.get("returned_doc_keys") if isinstance(details.get("returned_doc_keys"), list) else []
    withheld = details.get("withheld_doc_keys") if isinstance(details.get("withheld_doc_keys"), list) else []
    candidates = details.get("l1_candidates")
    if isinstance(candidates, list) and candidates:
        # The level model's estimate of each document and the evidence behind it: what decided
        # the level, where the similarity alone does not say.
        levels = details.get("levels") if isinstance(details.get("levels"), dict) else {}
        estimates = {e.get("doc_key"): e for e in levels.get("candidates") or [] if isinstance(e, dict)}
        rows = []
        for i, c in enumerate(candidates):
            if not isinstance(c, dict):
                continue
            key = c.get("doc_key") if isinstance(c.get("doc_key"), str) else None
            rows.append(
                {
                    "rank": i + 1,
                    "doc_key": key,
                    "title": c.get("title") if isinstance(c.get("title"), str) else "",
                    "chunk": c.get("chunk_index"),
                    "score": round(float(c["score"]), 4) if _is_number(c.get("score")) else None,
                    "similarity": round(float(c["similarity"]), 4)
                    if _is_number(c.get("similarity"))
                    else None,
                    "level": c.get("l1_level") if isinstance(c.get("l1_level"), str) else "",
                    "estimate": round(float(estimate), 4)
                    if _is_number(estimate := (estimates.get(key) or {}).get("estimate"))
                    else None,
                    "evidence": evidence_text((estimates.get(key) or {}).get("features")),
                    "mark": "returned" if key in returned else "withheld" if key in withheld else "",
                }
            )
        return rows
    max_l2 = float(settings.RETRIEVAL_MAX_L2_DISTANCE)
    rows = []
    for i, score in enumerate(details.get("l1_scores") or []):
        if not _is_number(score):
            continue
        similarity = 1 - min(max(float(score), 0.0), max_l2) / max_l2
        rows.append({"rank": i + 1, "score": round(float(score), 4), "similarity": round(similarity, 4)})
    return rows


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _document_links(rows: list[dict], details: dict) -> dict[str, str]:
    """doc_key -> its document's admin page, for the keys this record names."""
    from knowledge.models import ApiDocument

    keys = {r["doc_key"] for r in rows if r.get("doc_key")}
    for name in ("returned_doc_keys", "withheld_doc_keys"):
        if isinstance(details.get(name), list):
            keys |= {k for k in details[name] if isinstance(k, str)}
    documents = ApiDocument.objects.filter(doc_key__in=keys).values_list("doc_key", "pk")
    return {key: reverse("admin:knowledge_apidocument_change", args=[pk]) for key, pk in documents}


def _session_neighbours(obj: ToolInvocation) -> tuple[ToolInvocation | None, ToolInvocation | None]:
    """The previous and next call of the same session (by time)."""
    same = ToolInvocation.objects.filter(session_id=obj.session_id).exclude(pk=obj.pk)
    previous = same.filter(created_at__lte=obj.created_at).order_by("-created_at", "-pk").first()
    following = same.filter(created_at__gte=obj.created_at).order_by("created_at", "pk").first()
    return previous, following
