"""What the observability admin entries share: read-only records, and entries that are one page."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path, reverse

from observability.links import CHANGELIST


class ReadOnlyAdminMixin:
    """Nobody adds, edits or deletes through this entry: it is a record, or a page."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class PageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
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
