"""Django REST framework and the OpenAPI schema."""

import re

from django.core.exceptions import ImproperlyConfigured

from config.env import env

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "retrieval.agents.tokens.AgentTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's JSON parser, refusing too-deep nesting and out-of-range numbers with a 400.
    "DEFAULT_PARSER_CLASSES": ["config.parsers.SafeJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "config.exception_handlers.api_exception_handler",
    # One budget per agent across every agent-facing endpoint (every MCP request included),
    # counted atomically across processes (retrieval/agents/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": ["retrieval.agents.throttling.AgentThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        # Per agent (the token's user); generous enough for agent loops, a stop for runaways.
        "tool": env.str("API_THROTTLE_TOOL", default="600/min"),
        # Per agent, on top of "tool": at most this many calls in any second, so a minute's budget
        # cannot arrive as one burst in front of every other agent's lookups. Empty: no cap.
        "tool_burst": env.str("API_THROTTLE_TOOL_BURST", default="20/s"),
        # Per client address: presented keys that match no active agent (REST, MCP, Dify); past
        # it such requests are answered 429 instead of 401. A valid token is never refused by it.
        "failed_auth": env.str("API_THROTTLE_FAILED_AUTH", default="60/min"),
    },
}

# A rate is DRF's "<calls>/<period>" (period s, sec, m, min, h, hour, d, day): refused at start,
# naming the setting, rather than at an agent's first call.
_RATE = re.compile(r"^[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)$")
for _setting, _scope in (
    ("API_THROTTLE_TOOL", "tool"),
    ("API_THROTTLE_TOOL_BURST", "tool_burst"),
    ("API_THROTTLE_FAILED_AUTH", "failed_auth"),
):
    _raw = REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"][_scope]
    if _raw and not _RATE.match(_raw):
        raise ImproperlyConfigured(
            f"{_setting} must be a rate such as 600/min or 20/s (calls per s, min, hour or day), "
            f"or empty for no limit; got '{_raw}'"
        )

# Under ASGI every 429 is answered after this many milliseconds, on the event loop, so a client
# that asks again the moment it is refused slows itself, not the server (config/refusal_delay.py).
# 0: answer at once.
API_REFUSAL_DELAY_MS = env.int("API_REFUSAL_DELAY_MS", default=250)
if not 0 <= API_REFUSAL_DELAY_MS <= 10_000:
    raise ImproperlyConfigured(
        f"API_REFUSAL_DELAY_MS must be between 0 and 10000 milliseconds; got {API_REFUSAL_DELAY_MS}"
    )

SPECTACULAR_SETTINGS = {
    "TITLE": "agentkb API",
    "DESCRIPTION": "Knowledge retrieval for LLM agents: the lookup_knowledge tool and its companions.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and ReDoc from the sidecar package: no CDN, works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
