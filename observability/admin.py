from django.contrib import admin

from observability.models import ToolInvocation


@admin.register(ToolInvocation)
class ToolInvocationAdmin(admin.ModelAdmin):
    """Invocations are a record of what happened: staff read them, nobody edits them."""

    list_display = (
        "created_at",
        "tool_name",
        "session_id",
        "status",
        "relevance_level",
        "dedup_reason",
        "duration_ms",
    )
    list_filter = ("tool_name", "status", "relevance_level", "dedup_reason")
    search_fields = ("session_id",)
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
