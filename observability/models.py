"""What happened: one row per tool call (the seeds' tool_invocation table)."""

from django.db import models
from django.utils import timezone


class ToolInvocation(models.Model):
    class Status(models.TextChoices):
        SUCCESS = "SUCCESS", "Success"
        DEGRADED = "DEGRADED", "Degraded"
        ERROR = "ERROR", "Error"

    session_id = models.CharField(max_length=128, db_index=True)
    tool_name = models.CharField(max_length=64)
    request = models.JSONField(default=dict, blank=True)
    result_summary = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SUCCESS)
    error = models.TextField(blank=True, default="")
    duration_ms = models.IntegerField(default=0)
    retrieval_details = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # V010: normalised relevance level and the reason a result was withheld. NULL (not "") is
    # the seeds' "no dedup" and "history row": their GROUP BY queries depend on it.
    relevance_level = models.CharField(max_length=20, null=True, blank=True)  # noqa: DJ001
    dedup_reason = models.CharField(max_length=32, null=True, blank=True)  # noqa: DJ001

    class Meta:
        db_table = "tool_invocation"
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tool_name", "created_at"], name="tool_inv_tool_created_idx"),
            models.Index(fields=["relevance_level"], name="tool_inv_relevance_idx"),
            models.Index(fields=["dedup_reason"], name="tool_inv_dedup_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} #{self.pk} ({self.session_id})"
