"""Signals other apps answer, so the knowledge app asks without importing them.

``domain_deletion_refusals``: sent before staff are shown what deleting domains would take
(``sender=KnowledgeDomain``, ``domain_ids``). A receiver returns a reason to refuse (a string, in
the staff's language) or None. Knowledge imports neither retrieval nor observability; the app
that knows why a domain must stay (retrieval: a scoped agent's only domain) says so here.
"""

from __future__ import annotations

from django.dispatch import Signal

domain_deletion_refusals = Signal()


def domain_deletion_refusal_reasons(sender, domain_ids: list[str]) -> list[str]:
    """Every receiver's reason to refuse deleting ``domain_ids``, in the order they answered."""
    return [
        reason for _, reason in domain_deletion_refusals.send(sender=sender, domain_ids=domain_ids) if reason
    ]
