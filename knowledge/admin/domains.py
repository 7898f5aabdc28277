from django.contrib import admin

from knowledge.models import KnowledgeDomain


@admin.register(KnowledgeDomain)
class KnowledgeDomainAdmin(admin.ModelAdmin):
    list_display = ("domain_id", "description", "document_count", "updated_at")
    search_fields = ("domain_id", "description", "when_to_retrieve")
    readonly_fields = ("document_count", "created_at", "updated_at")
