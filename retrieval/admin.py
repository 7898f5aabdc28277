"""Admin for agents: the domains each one may see, its language, and its sessions; their tool
tokens (issued, listed by prefix, rotated and revoked here; a key is shown once, when issued).

An agent is the user a tool token belongs to (``retrieval.agents.tokens``); its profile is created with
its token. Sessions are the agent's own (two agents' ``conv-42`` are two sessions), so staff read
them here, by agent: each session with its calls, linked to the invocation list, and what its
action memory holds now.
"""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import admin
from django.db.models import Count, Max, Min
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from config.display import clipped, display_text
from observability.models import ToolInvocation
from retrieval.agents.identity import Agent
from retrieval.agents.tokens import IssuedToken, agent_token_issue, tool_token_issue, tool_token_name_clean
from retrieval.agents.tracker import TrackerUnavailable, get_tracker
from retrieval.models import AgentProfile, AgentToken
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


# --- tool tokens -------------------------------------------------------------------------------------
# DRF's own token admin lists keys in full; tokens are AgentToken now (hashed), its table is empty.
try:
    from rest_framework.authtoken.models import TokenProxy

    admin.site.unregister(TokenProxy)
except admin.sites.NotRegistered:
    pass

ISSUED_TEMPLATE = "admin/retrieval/agenttoken/issued.html"


class AgentTokenAddForm(forms.ModelForm):
    agent = forms.CharField(
        label=_("agent name"),
        max_length=150,
        help_text=_(
            "An existing agent, or a new one (created with its profile). Letters, digits and @.+-_ only."
        ),
    )

    class Meta:
        model = AgentToken
        fields = ()

    def clean_agent(self) -> str:
        try:
            name = tool_token_name_clean(self.cleaned_data["agent"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc).removeprefix("name: ")) from None
        if AgentToken.objects.filter(user__username=name).exists():
            raise forms.ValidationError(
                gettext("This agent already has a token: select it in the list and rotate it.")
            )
        return name


def _issued_page(request, issued: list[IssuedToken], *, title: str) -> TemplateResponse:
    """The one page a key is ever shown on (never cached: admin views send no-cache headers)."""
    context = {
        **admin.site.each_context(request),
        "title": title,
        "issued": issued,
        "opts": AgentToken._meta,
        "changelist": reverse("admin:retrieval_agenttoken_changelist"),
    }
    return TemplateResponse(request, ISSUED_TEMPLATE, context)


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    """Tokens by agent and key prefix. Add = issue (the key is shown once, on the next page);
    the *rotate* action replaces keys (shown once likewise); delete = revoke (the next call with
    the key is 401)."""

    list_display = ("user", "key_prefix", "created", "agent_active")
    list_select_related = ("user",)
    list_filter = ("created",)
    search_fields = ("user__username", "prefix")
    ordering = ("user__username",)
    fields = ("user", "key_prefix", "created")
    readonly_fields = ("user", "key_prefix", "created")
    add_form = AgentTokenAddForm
    actions = ["rotate"]

    @admin.display(description=_("key"), ordering="prefix")
    def key_prefix(self, obj: AgentToken) -> str:
        return f"{obj.prefix}…"

    @admin.display(description=_("active"), boolean=True)
    def agent_active(self, obj: AgentToken) -> bool:
        return obj.user.is_active

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return ("agent",) if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # nothing to edit: a token is issued, rotated or revoked

    def save_form(self, request, form, change):
        # The service issues (and saves) the token; the key lives on the request until the
        # response page shows it.
        issued = tool_token_issue(name=form.cleaned_data["agent"])
        request.agentkb_issued = issued
        return issued.token

    def save_model(self, request, obj, form, change):
        pass  # saved by tool_token_issue in save_form

    def save_related(self, request, form, formsets, change):
        pass

    def response_add(self, request, obj, post_url_continue=None):
        return _issued_page(request, [request.agentkb_issued], title=gettext("Tool token issued"))

    # Rotating issues keys: it takes the permission to add tokens, not merely to see them.
    @admin.action(description=_("Rotate the selected tokens (new keys are shown once)"), permissions=["add"])
    def rotate(self, request, queryset):
        issued = [
            agent_token_issue(user=token.user, rotate=True) for token in queryset.select_related("user")
        ]
        return _issued_page(request, issued, title=gettext("Tool tokens rotated"))
