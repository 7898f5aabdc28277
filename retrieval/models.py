"""Agents: the Django user a tool token belongs to, and what staff decide about it."""

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AgentProfile(models.Model):
    """Per-agent settings staff edit in the admin. An agent without a profile sees every domain
    and speaks the global language (``retrieval.agents.identity.agent_for_user``)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        related_name="agent_profile",
        on_delete=models.CASCADE,
        verbose_name=_("agent"),
    )
    # Empty = every domain. Lookups, the knowledge map, the planner prompt, MCP and Dify see only
    # these domains (retrieval.agents.scopes).
    allowed_domains = models.ManyToManyField(
        "knowledge.KnowledgeDomain",
        blank=True,
        verbose_name=_("allowed domains"),
        help_text=_("Leave empty to let the agent see every domain."),
    )
    language = models.CharField(
        _("language"),
        max_length=8,
        blank=True,
        choices=[("", _("default")), ("zh", "中文"), ("en", "English")],
        help_text=_("The language of the messages this agent receives; default: the global setting."),
    )

    class Meta:
        verbose_name = _("agent profile")
        verbose_name_plural = _("agent profiles")

    def __str__(self) -> str:
        return self.user.get_username()


class AgentToken(models.Model):
    """An agent's tool token, kept as a keyed hash (``retrieval.agents.tokens.token_digest``): the
    key itself is shown once, when it is issued, and never stored. ``prefix`` (its first
    characters) is what staff see afterwards, to tell keys apart."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        related_name="agent_token",
        on_delete=models.CASCADE,
        verbose_name=_("agent"),
    )
    prefix = models.CharField(_("key prefix"), max_length=8)
    digest = models.CharField(_("key digest"), max_length=64, unique=True)
    created = models.DateTimeField(_("issued"), default=timezone.now)

    class Meta:
        verbose_name = _("tool token")
        verbose_name_plural = _("tool tokens")

    def __str__(self) -> str:
        return f"{self.prefix}…"
