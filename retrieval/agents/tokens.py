"""Tool tokens: one per agent. An agent is a non-staff user named after it.

A key is 40 random hex characters (160 bits), shown once when issued and stored only as a keyed
hash (``AgentToken.digest``: HMAC-SHA256 under a key derived from SECRET_KEY) beside its first 8
characters (``AgentToken.prefix``, what staff see). A fast keyed hash, not a slow password hash:
the key is random, not chosen by a person, so nothing is gained by slowing down a guess at 160
bits, and every request pays the hash (about a microsecond; PBKDF2 at Django's password cost
takes hundreds of milliseconds). Without SECRET_KEY the digests reveal nothing; with it, a key
still has to be guessed.

``token_lookup`` is the one place a presented key is looked up: REST (``AgentTokenAuthentication``,
``Authorization: Token <key>``), MCP (``retrieval.entrypoints.mcp_http``, ``Token`` or ``Bearer``),
Dify (``retrieval.entrypoints.dify_api``, ``Bearer``) all ask it, or ``token_user``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.crypto import salted_hmac
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header

from retrieval.agents.throttling import failed_auth_spend, refused_keys, request_address

# The HMAC key is derived from SECRET_KEY with this salt (Django's salted_hmac): changing either
# invalidates every token. The 0002 migration hashes with the same pair.
DIGEST_SALT = "agentkb.retrieval.agent-token"
PREFIX_CHARS = 8


class TokenExists(ValueError):
    """The agent already has a token; its key cannot be shown again, only replaced."""


@dataclass(frozen=True)
class IssuedToken:
    """A token as issued: ``key`` is readable here and nowhere else, ever."""

    key: str
    token: object  # retrieval.models.AgentToken

    @property
    def user(self):
        return self.token.user

    @property
    def user_id(self) -> int:
        return self.token.user_id

    @property
    def prefix(self) -> str:
        return self.token.prefix


def token_digest(key: str, *, secret: str | None = None) -> str:
    """The stored form of ``key``: HMAC-SHA256 under a key derived from ``secret`` (SECRET_KEY)."""
    return salted_hmac(DIGEST_SALT, key, secret=secret or settings.SECRET_KEY, algorithm="sha256").hexdigest()


def tool_token_name_clean(name: str) -> str:
    """An agent name as a username: the same rules (letters, digits and @.+-_, at most 150), so
    markup or combining marks never reach the staff pages that name the agent. ValueError naming
    the field otherwise."""
    name = (name or "").strip()
    if not name:
        raise ValueError("name: an agent name is required")
    user_model = get_user_model()
    try:
        user_model._meta.get_field(user_model.USERNAME_FIELD).run_validators(name)
    except ValidationError as exc:
        raise ValueError(f"name: {' '.join(exc.messages)}") from exc
    return name


@transaction.atomic
def tool_token_issue(*, name: str, rotate: bool = False) -> IssuedToken:
    """Issue the token of agent ``name``, creating the agent user (and its profile) if needed.

    An agent that already has a token raises TokenExists unless ``rotate``, which replaces it
    (the old key stops working at once).
    """
    name = tool_token_name_clean(name)
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=name, defaults={"is_staff": False, "is_superuser": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return agent_token_issue(user=user, rotate=rotate)


@transaction.atomic
def agent_token_issue(*, user, rotate: bool = False) -> IssuedToken:
    """Issue a token for an existing agent ``user`` (see ``tool_token_issue``)."""
    from retrieval.models import AgentProfile, AgentToken

    AgentProfile.objects.get_or_create(user=user)  # staff set its domains and language in the admin
    # Locks the agent's token row (if any): two concurrent rotations leave one token, not two errors.
    existing = AgentToken.objects.select_for_update().filter(user=user).first()
    if existing is not None:
        if not rotate:
            raise TokenExists(
                f"name: agent {user.get_username()!r} already has a token ({existing.prefix}…); a key is "
                "shown only when issued: rotate it to get a new one (the old one stops working)"
            )
        existing.delete()
    key = secrets.token_hex(20)
    token = AgentToken.objects.create(user=user, prefix=key[:PREFIX_CHARS], digest=token_digest(key))
    return IssuedToken(key=key, token=token)


def token_lookup(key: str):
    """The AgentToken of ``key`` with its user, or None (an empty or unknown key). Digests under
    SECRET_KEY_FALLBACKS are tried too, so rotating SECRET_KEY the Django way keeps tokens working
    while the old secret is a fallback."""
    if not key:
        return None
    from retrieval.models import AgentToken

    secrets_in_use = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    digests = [token_digest(key, secret=secret) for secret in secrets_in_use]
    return AgentToken.objects.select_related("user").filter(digest__in=digests).first()


def token_user(key: str):
    """The active agent user ``key`` belongs to, or None: what every agent-facing endpoint asks."""
    token = token_lookup(key)
    return token.user if token is not None and token.user.is_active else None


#: The schemes an agent may present its key with: DRF's ``Token`` and, as MCP and Dify accept it
#: and most agent frameworks send it, ``Bearer``.
AUTH_SCHEMES = (b"token", b"bearer")


class AgentTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>`` or ``Authorization: Bearer <key>``, the key looked up by
    ``token_lookup``. A key that fails spends one of the client address's failed keys
    (``failed_auth_spend``): past API_THROTTLE_FAILED_AUTH the answer is 429 (``Retry-After``)
    instead of 401."""

    def authenticate(self, request):
        try:
            return self._authenticate(request)
        except exceptions.AuthenticationFailed:
            wait = failed_auth_spend(request_address(request))
            if wait is not None:
                raise exceptions.Throttled(wait) from None
            raise

    def _authenticate(self, request):
        # DRF's TokenAuthentication.authenticate with either scheme (it knows one keyword).
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() not in AUTH_SCHEMES:
            return None
        if len(auth) == 1:
            raise exceptions.AuthenticationFailed("Invalid token header. No credentials provided.")
        if len(auth) > 2:
            raise exceptions.AuthenticationFailed(
                "Invalid token header. Token string should not contain spaces."
            )
        try:
            key = auth[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(
                "Invalid token header. Token string should not contain invalid characters."
            ) from None
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key):
        # An agent this process just refused is refused again before the database is asked.
        wait = refused_keys.wait(token_digest(key))
        if wait is not None:
            raise exceptions.Throttled(wait)
        token = token_lookup(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return token.user, token
