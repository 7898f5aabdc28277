from django.contrib import admin

from knowledge.models import ApiDocument


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
