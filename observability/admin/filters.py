"""The invocation list's filters: their parameters are what the charts and dashboards link to."""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from knowledge.models import KnowledgeDomain
from observability import selectors


class LevelFilter(admin.SimpleListFilter):
    title = _("relevance level")
    parameter_name = "level"

    def lookups(self, request, model_admin):
        # Levels are names of their own (PRECISE...); "not found" is words, shown translated.
        return [
            (value or "none", label if value else gettext(label))
            for value, label in selectors.RELEVANCE_LEVELS
        ]

    def queryset(self, request, queryset):
        return queryset.filter(selectors.level_filter_q(self.value())) if self.value() else queryset


class DedupFilter(admin.SimpleListFilter):
    title = _("dedup reason")
    parameter_name = "dedup"

    def lookups(self, request, model_admin):
        return [
            (value or "none", label if value else gettext(label)) for value, label in selectors.DEDUP_REASONS
        ]

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
