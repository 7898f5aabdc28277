"""Feedback on what a lookup returned: the data threshold calibration learns from."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from observability.models import InvocationFeedback, ToolInvocation

MAX_COMMENT_CHARS = 2000


@transaction.atomic
def feedback_record(
    *,
    invocation_id: int,
    helpful: bool,
    user,
    source: str,
    comment: str = "",
) -> tuple[InvocationFeedback, bool]:
    """Record that ``user`` found invocation ``invocation_id`` helpful or not.

    One judgement per invocation and user: judging again replaces the earlier one. Returns the
    feedback and whether it was created (False: replaced).
    """
    if not isinstance(helpful, bool):
        raise ValidationError({"helpful": "must be true or false"})
    comment = (comment or "").strip()
    if len(comment) > MAX_COMMENT_CHARS:
        raise ValidationError({"comment": f"at most {MAX_COMMENT_CHARS} characters"})
    if source not in InvocationFeedback.Source.values:
        raise ValidationError({"source": f"must be one of {', '.join(InvocationFeedback.Source.values)}"})
    invocation = ToolInvocation.objects.filter(pk=invocation_id).first()
    if invocation is None:
        raise ValidationError({"invocation_id": f"no tool invocation with id {invocation_id}"})
    now = timezone.now()
    feedback, created = InvocationFeedback.objects.select_for_update().update_or_create(
        invocation=invocation,
        user=user,
        defaults={"helpful": helpful, "comment": comment, "source": source, "updated_at": now},
        create_defaults={
            "helpful": helpful,
            "comment": comment,
            "source": source,
            "created_at": now,
            "updated_at": now,
        },
    )
    return feedback, created
