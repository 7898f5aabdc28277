"""The language agents are spoken to in: ``agent_language(user=None) -> "zh" | "en"``.

The global setting ``AGENT_LANGUAGE`` (the seeds' Chinese by default) unless the agent's profile
(``user.agent_profile.language``, set by staff in the admin) names one. The profile is optional:
an agent without one, a user model without the relation, an anonymous caller or none at all get
the global setting.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ObjectDoesNotExist

LANGUAGES = ("zh", "en")
_ALIASES = {
    "zh": "zh",
    "zh-hans": "zh",
    "zh_hans": "zh",
    "zh-cn": "zh",
    "cn": "zh",
    "en": "en",
    "en-us": "en",
}


def language_normalise(value: Any) -> str | None:
    """``"zh"`` or ``"en"`` for any spelling of them, None for anything else (blank included)."""
    if not isinstance(value, str):
        return None
    return _ALIASES.get(value.strip().lower())


def default_language() -> str:
    return language_normalise(settings.AGENT_LANGUAGE) or "zh"


def agent_language(user: Any = None) -> str:
    """The agent-facing language for ``user`` (a user, a username, or None: the global setting)."""
    if isinstance(user, str):
        user = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: user}).first()
    if user is None:
        return default_language()
    try:
        profile = getattr(user, "agent_profile", None)
    except ObjectDoesNotExist:  # a one-to-one accessor without a row
        profile = None
    return language_normalise(getattr(profile, "language", None)) or default_language()
