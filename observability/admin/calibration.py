"""The threshold calibration page: judgements per similarity band, the suggestion, apply / revert."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from observability import calibration, charts
from observability.admin.base import PageAdmin
from observability.forms import ThresholdApplyForm
from observability.models import ThresholdCalibration


@admin.register(ThresholdCalibration)
class ThresholdCalibrationAdmin(PageAdmin):
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
