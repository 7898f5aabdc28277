"""Admin for knowledge domains: the planner guidance, where it came from and how its last
regeneration went, with a "regenerate now" action. Edits go through the domain services."""

from django.contrib import admin, messages
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from knowledge.models import KnowledgeDomain
from knowledge.services.domains import domain_guidance_update, domain_summary_regenerate_now


@admin.register(KnowledgeDomain)
class KnowledgeDomainAdmin(admin.ModelAdmin):
    list_display = (
        "domain_id",
        "description",
        "document_count",
        "summary_source",
        "last_regenerated_at",
        "summary_state",
        "error_short",
    )
    list_filter = ("summary_source", "summary_state")
    search_fields = ("domain_id", "description", "when_to_retrieve")
    fields = (
        "domain_id",
        "description",
        "when_to_retrieve",
        "summary_source",
        "summary_state",
        "last_regenerated_at",
        "last_error",
        "document_count",
        "created_at",
        "updated_at",
    )
    readonly_fields = (
        "document_count",
        "summary_source",
        "summary_state",
        "last_regenerated_at",
        "last_error",
        "created_at",
        "updated_at",
    )
    actions = ["regenerate_now"]

    def get_readonly_fields(self, request, obj=None):
        # domain_id is the documents' category: renaming it here would orphan them.
        return (*self.readonly_fields, "domain_id") if obj else self.readonly_fields

    @admin.display(description=_("last error"))
    def error_short(self, obj):
        return Truncator(obj.last_error).chars(80) if obj.last_error else ""

    def save_model(self, request, obj, form, change):
        # A hand-written when_to_retrieve becomes "manual" (never regenerated); cleared, it
        # goes back to the generator.
        domain_guidance_update(
            domain=obj,
            when_to_retrieve=form.cleaned_data.get("when_to_retrieve"),
            description=form.cleaned_data.get("description"),
        )

    @admin.action(description=_("Regenerate now (ignore the debounce window)"))
    def regenerate_now(self, request, queryset):
        domain_ids = list(queryset.values_list("domain_id", flat=True))
        for domain_id in domain_ids:
            domain_summary_regenerate_now(domain_id=domain_id)
        self.message_user(
            request,
            ngettext(
                "Regeneration queued for %(count)d domain.",
                "Regeneration queued for %(count)d domains.",
                len(domain_ids),
            )
            % {"count": len(domain_ids)},
            messages.SUCCESS,
        )
