"""Admin for agents: the domains each one may see, its language, and its sessions.

An agent is the user a tool token belongs to (``retrieval.agents.tokens``); its profile is created with
its token. Sessions are the agent's own (two agents' ``conv-42`` are two sessions), so staff read
them here, by agent: each session with its calls, linked to the invocation list, and what its
action memory holds now.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.db.models import Count, Max, Min
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from config.display import clipped, display_text
from observability.models import ToolInvocation
from retrieval.agents.identity import Agent
from retrieval.agents.tracker import TrackerUnavailable, get_tracker
from retrieval.models import AgentProfile
from retrieval.staff import hit_testing_admin  # noqa: F401 - registers the hit testing page

SESSIONS_SHOWN = 50
SESSION_WINDOW = timedelta(days=7)


def agent_sessions(user_id: int, *, limit: int = SESSIONS_SHOWN) -> list[dict]:
    """The agent's latest sessions of the last week, newest first: id, calls, first and last call."""
    since = timezone.now() - SESSION_WINDOW
    return list(
        ToolInvocation.objects.filter(agent_id=user_id, created_at__gte=since)
        .exclude(session_id="")
        .values("session_id")
        .annotate(calls=Count("id"), first=Min("created_at"), last=Max("created_at"))
        .order_by("-last")[:limit]
    )


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    list_display = ("user", "scope", "language", "sessions_this_week")
    list_select_related = ("user",)
    search_fields = ("user__username",)
    filter_horizontal = ("allowed_domains",)
    fields = ("user", "allowed_domains", "language", "sessions")
    readonly_fields = ("sessions",)
    raw_id_fields = ("user",)

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("allowed_domains")

    @admin.display(description=_("domains"))
    def scope(self, obj: AgentProfile) -> str:
        names = [d.domain_id for d in obj.allowed_domains.all()]
        return ", ".join(names) if names else gettext("every domain")

    @admin.display(description=_("sessions (7 days)"))
    def sessions_this_week(self, obj: AgentProfile) -> int:
        since = timezone.now() - SESSION_WINDOW
        return (
            ToolInvocation.objects.filter(agent_id=obj.user_id, created_at__gte=since)
            .exclude(session_id="")
            .values("session_id")
            .distinct()
            .count()
        )

    @admin.display(description=_("sessions"))
    def sessions(self, obj: AgentProfile) -> str:
        if obj.pk is None:
            return "–"
        rows = agent_sessions(obj.user_id)
        if not rows:
            return gettext("no sessions in the last 7 days")
        agent = Agent(id=obj.user_id, name=obj.user.get_username())
        tracker = get_tracker()
        changelist = reverse("admin:observability_toolinvocation_changelist")

        def memory(session_id: str) -> str:
            try:
                domains = tracker.snapshot(agent.memory_key(session_id)).domains
            except TrackerUnavailable:
                return gettext("action memory unavailable")
            held = sum(len(docs) for docs in domains.values())
            return gettext("%(docs)s documents in %(domains)s domains") % {
                "docs": held,
                "domains": len(domains),
            }

        body = format_html_join(
            "",
            '<tr><td><a href="{}?{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    changelist,
                    urlencode(
                        {"agent__id__exact": obj.user_id, "session_id": display_text(row["session_id"])}
                    ),
                    # An agent chooses its session ids: shown tamed and clipped, whole on hover.
                    clipped(row["session_id"], 40),
                    row["calls"],
                    timezone.localtime(row["first"]).strftime("%Y-%m-%d %H:%M"),
                    timezone.localtime(row["last"]).strftime("%Y-%m-%d %H:%M"),
                    memory(row["session_id"]),
                )
                for row in rows
            ),
        )
        return format_html(
            '<table id="agent-sessions"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th>'
            "</tr></thead><tbody>{}</tbody></table>",
            gettext("session"),
            gettext("calls"),
            gettext("first call"),
            gettext("last call"),
            gettext("action memory now"),
            body,
        )
