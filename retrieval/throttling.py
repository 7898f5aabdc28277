"""Per-token throttling of the tool endpoints (rate ``tool`` in REST_FRAMEWORK, API_THROTTLE_TOOL)."""

from __future__ import annotations

import hashlib

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


class ToolTokenThrottle(SimpleRateThrottle):
    """One budget per agent token, shared by every process through the default cache (Redis in
    production). Keyed by a hash of the token, so a rotated token starts afresh and no token
    appears in cache keys."""

    scope = "tool"

    def get_rate(self) -> str | None:
        # Read per request, not at import, so a changed setting applies (tests, reloads).
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request, view) -> str | None:
        key = getattr(request.auth, "key", None)
        if key:
            ident = "t" + hashlib.sha256(key.encode()).hexdigest()[:32]
        elif request.user and request.user.is_authenticated:
            ident = f"u{request.user.pk}"
        else:
            ident = self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
