"""Deleting a domain never widens an agent's scope (``retrieval.agents.scopes.profiles_left_unscoped_by``):
whatever deletes it (the admin, a shell, a command), the deletion is refused while it is some
scoped agent's only allowed domain. The admin shows the same refusal before it gets here, through
the knowledge app's ``domain_deletion_refusals`` signal."""

from __future__ import annotations

from django.db.models import ProtectedError
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from knowledge.models import KnowledgeDomain
from knowledge.signals import domain_deletion_refusals
from retrieval.agents.scopes import profiles_left_unscoped_by, scope_deletion_message


@receiver(pre_delete, sender=KnowledgeDomain, dispatch_uid="retrieval.domain_scope_guard")
def domain_delete_refuse_when_a_scope_would_widen(sender, instance: KnowledgeDomain, **kwargs) -> None:
    profiles = profiles_left_unscoped_by([instance.domain_id])
    if profiles:
        raise ProtectedError(
            f"Domain '{instance.domain_id}' cannot be deleted: {scope_deletion_message(profiles)}.",
            set(profiles),
        )


@receiver(domain_deletion_refusals, sender=KnowledgeDomain, dispatch_uid="retrieval.domain_scope_refusal")
def domain_deletion_refusal(sender, domain_ids: list[str], **kwargs) -> str | None:
    profiles = profiles_left_unscoped_by(domain_ids)
    return scope_deletion_message(profiles) if profiles else None
