"""What happened: one row per tool call (the seeds' tool_invocation table), the feedback agents
and staff give on those calls, and the threshold calibrations staff applied from that feedback."""

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from observability import records  # the retrieval_details keys (a module of constants, no models)
from observability.expressions import JSONNumber, JSONString

# The key of ``retrieval_details`` naming the domains of the documents a lookup returned, primary
# first. The dashboards' domain filter reads the first one through a generated column.
RETURNED_DOMAINS_KEY = records.RETURNED_DOMAINS


def invocation_public_id_new() -> str:
    """The id an agent sees for its invocation: random, so it says nothing about traffic volume
    and cannot be guessed (the primary key is sequential)."""
    return "inv_" + secrets.token_urlsafe(16)


class ToolInvocation(models.Model):
    class Status(models.TextChoices):
        SUCCESS = "SUCCESS", _("Success")
        DEGRADED = "DEGRADED", _("Degraded")
        ERROR = "ERROR", _("Error")

    session_id = models.CharField(max_length=128, db_index=True, verbose_name=_("session id"))
    tool_name = models.CharField(max_length=64, verbose_name=_("tool name"))
    # The agent (the tool token's user) that made the call: sessions, feedback and records are
    # per agent. NULL for calls without one (the ``lookup`` command, stdio MCP, old rows).
    agent = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("agent"),
    )
    # What agents see and send back as the invocation id. NULL only on rows older than the column.
    public_id = models.CharField(
        max_length=32,
        unique=True,
        null=True,
        blank=True,
        default=invocation_public_id_new,
        editable=False,
        verbose_name=_("public id"),
    )
    request = models.JSONField(default=dict, blank=True, verbose_name=_("request"))
    result_summary = models.TextField(blank=True, default="", verbose_name=_("result summary"))
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.SUCCESS, verbose_name=_("status")
    )
    error = models.TextField(blank=True, default="", verbose_name=_("error"))
    duration_ms = models.IntegerField(default=0, verbose_name=_("duration (ms)"))
    retrieval_details = models.JSONField(null=True, blank=True, verbose_name=_("retrieval details"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=_("created at"))
    # V010: normalised relevance level and the reason a result was withheld. NULL (not "") is
    # the seeds' "no dedup" and "history row": their GROUP BY queries depend on it.
    relevance_level = models.CharField(_("relevance level"), max_length=20, null=True, blank=True)  # noqa: DJ001
    dedup_reason = models.CharField(_("dedup reason"), max_length=32, null=True, blank=True)  # noqa: DJ001
    # Stored generated columns (observability.expressions): the database copies these out of
    # retrieval_details on every insert, whoever writes the row, so the dashboards group and
    # filter a million rows by index instead of parsing JSON per row.
    # No verbose_name on the generated columns: SQLite would rebuild the table to change it (the
    # list shows them through admin.display labels).
    l1_top_similarity = models.GeneratedField(
        expression=JSONNumber("retrieval_details", f"$.{records.L1_TOP_SIMILARITY}"),
        output_field=models.FloatField(null=True),
        db_persist=True,
    )
    primary_domain = models.GeneratedField(
        expression=JSONString("retrieval_details", f"$.{RETURNED_DOMAINS_KEY}[0]", 64),
        output_field=models.CharField(max_length=64, null=True),
        db_persist=True,
    )

    class Meta:
        db_table = "tool_invocation"
        ordering = ["-created_at"]
        verbose_name = _("tool invocation")
        verbose_name_plural = _("tool invocations")
        indexes = [
            # The invocation list's newest-first order (and its date filters) over all tools.
            models.Index(fields=["created_at"], name="tool_inv_created_idx"),
            models.Index(fields=["relevance_level"], name="tool_inv_relevance_idx"),
            models.Index(fields=["dedup_reason"], name="tool_inv_dedup_idx"),
            # Covers every dashboard aggregation (tool + time range first, then what they group
            # or filter by), so MariaDB answers them from the index without reading rows. It
            # replaces the original (tool_name, created_at) index, its prefix.
            models.Index(
                fields=[
                    "tool_name",
                    "created_at",
                    "relevance_level",
                    "dedup_reason",
                    "status",
                    "duration_ms",
                    "l1_top_similarity",
                    "primary_domain",
                    "session_id",
                    "agent",
                ],
                name="tool_inv_dashboard_idx",
            ),
        ]

    def __str__(self) -> str:
        # No session id: it is the agent's own string, and this is every page's title.
        return f"{self.tool_name} #{self.pk}"


class InvocationDailyRollup(models.Model):
    """Per-day counts of tool_invocation, so a 30-day dashboard reads a few thousand rows instead
    of a million (observability.rollups). Days are those of TIME_ZONE; a day is rolled up once it
    has ended, and never changes after (invocations are recorded as they happen).

    One table, four kinds of count; each row counts ``calls`` invocations (``sessions`` rows:
    sessions) of one tool, primary domain and agent that day:
    - ``level``: by status, relevance_level, dedup_reason and similarity bin (0.05 wide);
    - ``latency``: by duration_ms;
    - ``not_found``: by query, for lookups that ended not found;
    - ``sessions``: by how many calls a session made that day. Sessions do not add up across
      tools or domains, so these rows also exist for all tools (tool_name "") and all domains
      (primary_domain ""). They do add up across agents: a session belongs to the agent that
      opened it (two agents' ``conv-42`` are two sessions).
    """

    class Kind(models.TextChoices):
        LEVEL = "level", _("level")
        LATENCY = "latency", _("latency")
        NOT_FOUND = "not_found", _("not found")
        SESSIONS = "sessions", _("sessions")

    ALL = ""  # tool_name / primary_domain of the sessions rows that span all tools / domains

    day = models.DateField(verbose_name=_("day"))
    kind = models.CharField(max_length=16, choices=Kind.choices, verbose_name=_("kind"))
    tool_name = models.CharField(max_length=64, verbose_name=_("tool name"))
    primary_domain = models.CharField(_("primary domain"), max_length=64, null=True)  # noqa: DJ001 - NULL: no primary domain
    # The calls' agent, NULL for calls without one. Deleting the agent sets NULL here as it does
    # on tool_invocation, so rolled-up days keep matching the rows they count.
    agent = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        related_name="+",
        db_index=False,
        verbose_name=_("agent"),
    )
    status = models.CharField(max_length=16, blank=True, default="", verbose_name=_("status"))
    relevance_level = models.CharField(_("relevance level"), max_length=20, null=True)  # noqa: DJ001 - NULL: not found
    dedup_reason = models.CharField(_("dedup reason"), max_length=32, null=True)  # noqa: DJ001 - NULL: none
    similarity_bin = models.SmallIntegerField(null=True, verbose_name=_("similarity bin"))
    # duration_ms (latency rows) or calls in one session that day (sessions rows).
    value = models.IntegerField(null=True, verbose_name=_("value"))
    query = models.TextField(blank=True, default="", verbose_name=_("query"))
    calls = models.IntegerField(verbose_name=_("calls"))

    class Meta:
        db_table = "tool_invocation_daily"
        verbose_name = _("daily invocation rollup")
        verbose_name_plural = _("daily invocation rollups")
        indexes = [
            models.Index(fields=["kind", "tool_name", "day"], name="tool_inv_daily_idx"),
            # SET_NULL when an agent is deleted.
            models.Index(fields=["agent", "day"], name="tool_inv_daily_agent_idx"),
            # A day's rebuild deletes its rows first: without this, a scan of every day.
            models.Index(fields=["day"], name="tool_inv_daily_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.kind} {self.tool_name}: {self.calls}"


class InvocationRollupDay(models.Model):
    """Which days are rolled up, in which time zone (a changed TIME_ZONE rebuilds them)."""

    day = models.DateField(verbose_name=_("day"))
    time_zone = models.CharField(max_length=64, verbose_name=_("time zone"))
    built_at = models.DateTimeField(default=timezone.now, verbose_name=_("built at"))
    invocations = models.IntegerField(default=0, verbose_name=_("invocations"))

    class Meta:
        db_table = "tool_invocation_rollup_day"
        verbose_name = _("rolled-up day")
        verbose_name_plural = _("rolled-up days")
        constraints = [models.UniqueConstraint(fields=["day"], name="uniq_rollup_day")]

    def __str__(self) -> str:
        return f"{self.day} ({self.time_zone})"


class RetrievalDashboard(ToolInvocation):
    """Admin entry for the dashboard page (no table: a proxy, so it is listed on the admin index
    and staff can be given its view permission on its own)."""

    class Meta:
        proxy = True
        verbose_name = _("retrieval dashboard")
        verbose_name_plural = _("retrieval dashboard")


class HitTest(ToolInvocation):
    """Admin entry for the hit-testing page (a proxy, like RetrievalDashboard)."""

    class Meta:
        proxy = True
        verbose_name = _("hit testing")
        verbose_name_plural = _("hit testing")


class InvocationFeedback(models.Model):
    """Whether what a lookup returned helped: from the agent (API) or from staff (admin).

    One judgement per invocation and user; judging again replaces the earlier one.
    """

    class Source(models.TextChoices):
        AGENT = "AGENT", _("Agent (API)")
        STAFF = "STAFF", _("Staff (admin)")

    invocation = models.ForeignKey(
        ToolInvocation, on_delete=models.CASCADE, related_name="feedback", verbose_name=_("invocation")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, verbose_name=_("user")
    )
    source = models.CharField(max_length=8, choices=Source.choices, verbose_name=_("source"))
    helpful = models.BooleanField(verbose_name=_("helpful"))
    comment = models.TextField(blank=True, default="", verbose_name=_("comment"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=_("created at"))
    updated_at = models.DateTimeField(default=timezone.now, verbose_name=_("updated at"))

    class Meta:
        db_table = "tool_invocation_feedback"
        ordering = ["-updated_at"]
        verbose_name = _("invocation feedback")
        verbose_name_plural = _("invocation feedback")
        constraints = [
            models.UniqueConstraint(fields=["invocation", "user"], name="uniq_feedback_per_user"),
        ]

    def __str__(self) -> str:
        return f"{'helpful' if self.helpful else 'not helpful'} on #{self.invocation_id}"


class ThresholdCalibration(models.Model):
    """A threshold pair staff applied (seed 000 Phase 2, 分数反馈调优). The latest row wins over
    the RETRIEVAL_*_THRESHOLD settings; a row with ``reverted`` set hands control back to them."""

    highly_relevant_threshold = models.FloatField(
        null=True, blank=True, verbose_name=_("HIGHLY_RELEVANT threshold")
    )
    reference_threshold = models.FloatField(null=True, blank=True, verbose_name=_("REFERENCE threshold"))
    reverted = models.BooleanField(default=False, verbose_name=_("reverted"))
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="threshold_calibrations",
        verbose_name=_("applied by"),
    )
    applied_at = models.DateTimeField(default=timezone.now, db_index=True, verbose_name=_("applied at"))
    feedback_count = models.IntegerField(default=0, verbose_name=_("feedback count"))
    # The bands and the scores behind the suggestion, as shown when it was applied.
    evidence = models.JSONField(default=dict, blank=True, verbose_name=_("evidence"))
    note = models.TextField(blank=True, default="", verbose_name=_("note"))

    class Meta:
        db_table = "threshold_calibration"
        ordering = ["-applied_at", "-id"]
        verbose_name = _("threshold calibration")
        # The admin's sidebar shows the plural: one name for the page, sidebar and title alike.
        verbose_name_plural = _("threshold calibration")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(reverted=True)
                | models.Q(
                    reference_threshold__gte=0,
                    highly_relevant_threshold__lte=1,
                    reference_threshold__lte=models.F("highly_relevant_threshold"),
                ),
                name="calibration_thresholds_ordered",
            ),
        ]

    def __str__(self) -> str:
        if self.reverted:
            return f"back to settings ({self.applied_at:%Y-%m-%d %H:%M})"
        return f"{self.reference_threshold:.2f} / {self.highly_relevant_threshold:.2f} ({self.applied_at:%Y-%m-%d %H:%M})"
