from django.contrib import admin

from knowledge.models import ApiDocument, KnowledgeDomain


@admin.register(KnowledgeDomain)
class KnowledgeDomainAdmin(admin.ModelAdmin):
    list_display = ("domain_id", "description", "document_count", "updated_at")
    search_fields = ("domain_id", "description", "when_to_retrieve")
    readonly_fields = ("document_count", "created_at", "updated_at")


@admin.register(ApiDocument)
class ApiDocumentAdmin(admin.ModelAdmin):
    list_display = ("title", "doc_key", "domain", "status", "chunk_count", "indexed_at", "updated_at")
    list_filter = ("status", "domain")
    search_fields = ("title", "doc_key")
    readonly_fields = (
        "content_hash",
        "status",
        "error",
        "chunk_count",
        "indexed_at",
        "created_at",
        "updated_at",
    )
