"""Tool tokens: one DRF token per agent. An agent is a non-staff user named after it.

``token_lookup`` is the one place a presented key is looked up: REST (``AgentTokenAuthentication``,
``Authorization: Token <key>``), MCP (``retrieval.entrypoints.mcp_http``), Dify
(``retrieval.entrypoints.dify_api``, ``Bearer``) and ``/healthz`` all ask it.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from retrieval.agents.throttling import failed_auth_spend, request_address


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


def token_lookup(key: str) -> Token | None:
    """The token of ``key`` with its user, or None (an empty or unknown key)."""
    if not key:
        return None
    return Token.objects.select_related("user").filter(key=key).first()


def token_user(key: str):
    """The active agent user ``key`` belongs to, or None: what every agent-facing endpoint asks."""
    token = token_lookup(key)
    return token.user if token is not None and token.user.is_active else None


class AgentTokenAuthentication(TokenAuthentication):
    """DRF's ``Authorization: Token <key>``, the key looked up by ``token_lookup``. A key that
    fails spends one of the client address's failed keys (``failed_auth_spend``): past
    API_THROTTLE_FAILED_AUTH the answer is 429 (``Retry-After``) instead of 401."""

    def authenticate(self, request):
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            wait = failed_auth_spend(request_address(request))
            if wait is not None:
                raise exceptions.Throttled(wait) from None
            raise

    def authenticate_credentials(self, key):
        token = token_lookup(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return token.user, token
