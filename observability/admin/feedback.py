"""Staff and agent judgements of invocations, listed."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from config.display import clipped, display_text
from observability.models import InvocationFeedback


@admin.register(InvocationFeedback)
class InvocationFeedbackAdmin(admin.ModelAdmin):
    list_display = (
        "updated_at",
        "invocation_link",
        "helpful",
        "source",
        "user",
        "similarity",
        "comment_shown",
    )
    list_filter = ("helpful", "source")
    list_select_related = ("invocation", "user")
    search_fields = ("comment", "invocation__session_id")
    fields = (
        "invocation_link",
        "helpful",
        "source",
        "user",
        "similarity",
        "comment_full",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    @admin.display(description=_("invocation"))
    def invocation_link(self, obj: InvocationFeedback) -> str:
        url = reverse("admin:observability_toolinvocation_change", args=[obj.invocation_id])
        return format_html('<a href="{}">#{}</a>', url, obj.invocation_id)

    @admin.display(description=_("comment"))
    def comment_shown(self, obj: InvocationFeedback) -> str:
        return clipped(obj.comment, 60)

    @admin.display(description=_("comment"))
    def comment_full(self, obj: InvocationFeedback) -> str:
        return (
            format_html("<pre class='okb-json'>{}</pre>", display_text(obj.comment)) if obj.comment else "–"
        )

    @admin.display(description=_("similarity"))
    def similarity(self, obj: InvocationFeedback) -> str:
        value = obj.invocation.l1_top_similarity
        return "" if value is None else f"{value:.3f}"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
