"""Admin for knowledge domains: the planner guidance, where it came from and how its last
regeneration went, with a "regenerate now" action. Edits go through the domain services."""

from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from config.display import clipped
from knowledge.models import ApiDocument, KnowledgeDomain
from knowledge.services.domains import domain_guidance_update, domain_summary_regenerate_now
from knowledge.signals import domain_deletion_refusal_reasons

#: documents listed on a domain's page (the rest: a link to the documents list filtered by it)
DOMAIN_PAGE_DOCUMENTS = 100
STATUS_COLOURS = {"INDEXED": "#2e7d32", "FAILED": "#c62828", "INDEXING": "#1565c0", "PENDING": "#6d6d6d"}


@admin.register(KnowledgeDomain)
class KnowledgeDomainAdmin(admin.ModelAdmin):
    # Long text is clipped (whole on hover) so the table fits the page at any width.
    list_display = (
        "domain_id",
        "description_short",
        "when_to_retrieve_short",
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
        "documents_list",
        "created_at",
        "updated_at",
    )
    readonly_fields = (
        "document_count",
        "documents_list",
        "summary_source",
        "summary_state",
        "last_regenerated_at",
        "last_error",
        "created_at",
        "updated_at",
    )
    actions = ["regenerate_now"]
    change_list_template = "admin/knowledge/knowledgedomain/change_list.html"

    def changelist_view(self, request, extra_context=None):
        # Who writes when_to_retrieve, said where staff read it: with no LLM configured, the
        # extractive summariser copies sentences from the documents.
        extra_context = {**(extra_context or {}), "summariser": summariser_in_use()}
        return super().changelist_view(request, extra_context=extra_context)

    def get_deleted_objects(self, objs, request):
        """Django's list of what a deletion takes, plus every refusal another app gives
        (``knowledge.signals``: a domain that is a scoped agent's only allowed domain)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        refusals = domain_deletion_refusal_reasons(KnowledgeDomain, [d.domain_id for d in objs])
        return deleted, counts, perms_needed, [*protected, *refusals]

    def get_readonly_fields(self, request, obj=None):
        # domain_id is the documents' category: renaming it here would orphan them.
        return (*self.readonly_fields, "domain_id") if obj else self.readonly_fields

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "description":  # the whole description in view, not a one-line box
            kwargs["widget"] = forms.Textarea(attrs={"rows": 3, "cols": 80})
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    @admin.display(description=_("description"), ordering="description")
    def description_short(self, obj):
        return clipped(obj.description, 60, empty="")

    @admin.display(description=_("when to retrieve"), ordering="when_to_retrieve")
    def when_to_retrieve_short(self, obj):
        return clipped(obj.when_to_retrieve, 80, empty="")

    @admin.display(description=_("last error"))
    def error_short(self, obj):
        return clipped(obj.last_error, 60, empty="") if obj.last_error else ""

    @admin.display(description=_("documents"))
    def documents_list(self, obj):
        if obj.pk is None:
            return ""
        documents = list(
            ApiDocument.objects.filter(domain=obj.domain_id)
            .order_by("doc_key")
            .values("pk", "doc_key", "title", "status")[: DOMAIN_PAGE_DOCUMENTS + 1]
        )
        if not documents:
            return format_html('<span class="okb-muted">{}</span>', gettext("No documents in this domain."))
        labels = dict(ApiDocument.Status.choices)
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td><code>{}</code></td>'
            '<td><span style="color:{};font-weight:600">{}</span></td></tr>',
            (
                (
                    reverse("admin:knowledge_apidocument_change", args=[d["pk"]]),
                    clipped(d["title"], 60),
                    clipped(d["doc_key"], 60),
                    STATUS_COLOURS.get(d["status"], "inherit"),
                    labels.get(d["status"], d["status"]),
                )
                for d in documents[:DOMAIN_PAGE_DOCUMENTS]
            ),
        )
        all_link = (
            reverse("admin:knowledge_apidocument_changelist") + "?" + urlencode({"domain": obj.domain_id})
        )
        more = (
            format_html('<p><a href="{}">{}</a></p>', all_link, gettext("All documents of this domain"))
            if len(documents) > DOMAIN_PAGE_DOCUMENTS
            else format_html(
                '<p><a href="{}">{}</a></p>', all_link, gettext("Open them in the documents list")
            )
        )
        return format_html(
            '<table id="domain-documents"><thead><tr><th>{}</th><th>{}</th><th>{}</th></tr></thead>'
            "<tbody>{}</tbody></table>{}",
            gettext("title"),
            gettext("doc key"),
            gettext("status"),
            rows,
            more,
        )

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


def summariser_in_use() -> dict[str, str]:
    """What writes the domains' when_to_retrieve and descriptions: the LLM or the offline
    extractive summariser (``LLM_BASE_URL`` empty)."""
    if settings.LLM_BASE_URL:
        return {"kind": "llm", "model": settings.LLM_MODEL, "url": settings.LLM_BASE_URL}
    return {"kind": "extractive"}
