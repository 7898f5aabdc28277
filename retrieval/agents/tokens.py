"""Tool tokens: one DRF token per agent. An agent is a non-staff user named after it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from rest_framework.authtoken.models import Token


@transaction.atomic
def tool_token_issue(*, name: str, rotate: bool = False) -> Token:
    """The token of agent ``name``, creating the agent user if needed.

    ``rotate`` replaces an existing key (the old one stops working at once).
    """
    name = name.strip()
    if not name:
        raise ValueError("name: an agent name is required")
    user_model = get_user_model()
    # The same rules as any username (letters, digits and @.+-_, at most 150): the name is shown
    # on every staff page that names the agent, so markup or combining marks never get in.
    try:
        user_model._meta.get_field(user_model.USERNAME_FIELD).run_validators(name)
    except ValidationError as exc:
        raise ValueError(f"name: {' '.join(exc.messages)}") from exc
    user, created = user_model.objects.get_or_create(
        username=name, defaults={"is_staff": False, "is_superuser": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    from retrieval.models import AgentProfile

    AgentProfile.objects.get_or_create(user=user)  # staff set its domains and language in the admin
    if rotate:
        Token.objects.filter(user=user).delete()
    token, _ = Token.objects.get_or_create(user=user)
    return token
