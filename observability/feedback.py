"""Feedback on what a lookup returned: the data threshold calibration learns from."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from observability.models import InvocationFeedback, ToolInvocation

MAX_COMMENT_CHARS = 2000
_PUBLIC_ID = re.compile(r"inv_[A-Za-z0-9_-]{1,28}")


@transaction.atomic
def feedback_record(
    *,
    invocation_id: int | str,
    helpful: bool,
    user,
    source: str,
    comment: str = "",
) -> tuple[InvocationFeedback, bool]:
    """Record that ``user`` found invocation ``invocation_id`` helpful or not.

    Agents (``source`` AGENT) name the invocation by the opaque id they were given
    (``ToolInvocation.public_id``) and may judge only their own calls; staff (STAFF, from the
    admin) name it by primary key and may judge any. One judgement per invocation and user: judging again replaces the earlier one. Returns the
    feedback and whether it was created (False: replaced).
    """
    if not isinstance(helpful, bool):
        raise ValidationError({"helpful": "must be true or false"})
    comment = (comment or "").strip()
    try:
        comment.encode("utf-8")
    except UnicodeEncodeError as exc:  # JSON lets lone surrogates through; UTF-8 cannot store them
        raise ValidationError(
            {
                "comment": f"Contains a character that is not valid Unicode text (a lone surrogate at {exc.start})."
            }
        ) from None
    if len(comment) > MAX_COMMENT_CHARS:
        raise ValidationError({"comment": f"at most {MAX_COMMENT_CHARS} characters"})
    if source not in InvocationFeedback.Source.values:
        raise ValidationError({"source": f"must be one of {', '.join(InvocationFeedback.Source.values)}"})
    invocation = _judgeable(invocation_id=invocation_id, user=user, source=source)
    if invocation is None:
        # The same answer for an id that does not exist and for another agent's invocation.
        raise ValidationError({"invocation_id": f"no tool invocation of yours with id {invocation_id!r}"})
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


def _judgeable(*, invocation_id: int | str, user, source: str) -> ToolInvocation | None:
    """The invocation ``user`` may judge, or None (unknown, or not theirs)."""
    if source == InvocationFeedback.Source.STAFF:
        if not (getattr(user, "is_staff", False) and str(invocation_id).isdigit()):
            return None
        return ToolInvocation.objects.filter(pk=int(invocation_id)).first()
    if not isinstance(invocation_id, str) or not _PUBLIC_ID.fullmatch(invocation_id):
        return None  # never a query with text the database could choke on (lone surrogates)
    return ToolInvocation.objects.filter(public_id=invocation_id, agent_id=user.pk).first()
