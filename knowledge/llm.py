"""The one LLM client: OpenAI chat completions, through the official ``openai`` package, against
any OpenAI-compatible endpoint (``LLM_BASE_URL``).

With ``LLM_BASE_URL`` empty (the embedded default) there is no client: ``get_llm_client()`` returns
None and callers use the offline extractive summariser (``knowledge.summaries``).

Errors are sorted in two: ``LLMUnavailable`` (connection, timeout, rate limit, 5xx: worth a later
retry) and ``LLMError`` (bad key, unknown model, refused request: retrying will not help).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import openai
from django.conf import settings


class LLMError(Exception):
    """The endpoint refused the request; retrying the same request will not help."""


class LLMUnavailable(LLMError):
    """The endpoint could not be reached or answered with a temporary error; retry later."""


@dataclass(frozen=True)
class LLMConfig:
    base_url: str
    api_key: str
    model: str
    timeout: float
    max_retries: int
    json_mode: bool

    @classmethod
    def from_settings(cls) -> LLMConfig:
        return cls(
            base_url=settings.LLM_BASE_URL.strip(),
            # The SDK refuses an empty key; local endpoints often need none.
            api_key=settings.LLM_API_KEY or "not-needed",
            model=settings.LLM_MODEL,
            timeout=float(settings.LLM_TIMEOUT),
            max_retries=int(settings.LLM_MAX_RETRIES),
            json_mode=bool(getattr(settings, "LLM_JSON_MODE", True)),
        )


class LLMClient:
    """A chat-completions client configured once from settings."""

    def __init__(self, config: LLMConfig):
        self.config = config
        # The SDK retries connection errors, 408/409/429 and 5xx itself, with exponential backoff.
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    @property
    def model(self) -> str:
        return self.config.model

    def chat(self, *, messages: list[dict[str, str]], json_output: bool = True) -> str:
        """Send ``messages`` and return the assistant's text (possibly empty).

        Raises LLMUnavailable for temporary failures, LLMError for permanent ones.
        """
        # No temperature: some models (reasoning ones) refuse any but their default, and the
        # answer is validated anyway.
        kwargs: dict = {"model": self.config.model, "messages": messages}
        if json_output and self.config.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            completion = self._client.chat.completions.create(**kwargs)
        except openai.APIConnectionError as exc:
            # APITimeoutError is an APIConnectionError.
            raise LLMUnavailable(f"{type(exc).__name__}: {_short(exc)}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                raise LLMUnavailable(f"HTTP {exc.status_code}: {_short(exc)}") from exc
            raise LLMError(f"HTTP {exc.status_code}: {_short(exc)}") from exc
        except openai.OpenAIError as exc:
            # e.g. a body that is not a chat completion at all.
            raise LLMUnavailable(f"{type(exc).__name__}: {_short(exc)}") from exc
        if not hasattr(completion, "choices"):
            # A 200 whose body is not JSON (a proxy's or captive portal's HTML page): the SDK
            # hands back the text. Temporary, like the endpoint being down.
            raise LLMUnavailable(
                f"the endpoint answered something that is not a chat completion: {_short(completion)}"
            )
        if not completion.choices:
            return ""
        return completion.choices[0].message.content or ""


def _short(exc: Exception, limit: int = 300) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


_lock = threading.Lock()
_cached: tuple[LLMConfig, LLMClient] | None = None


def get_llm_client() -> LLMClient | None:
    """The process's LLM client, or None when no endpoint is configured (extractive mode).

    Rebuilt when the settings change (tests point it at a fake endpoint per test).
    """
    global _cached
    config = LLMConfig.from_settings()
    if not config.base_url:
        return None
    with _lock:
        if _cached is None or _cached[0] != config:
            _cached = (config, LLMClient(config))
        return _cached[1]


def llm_source_name() -> str:
    """What the summaries of this process are written by: "llm" or "extractive"."""
    return "llm" if settings.LLM_BASE_URL.strip() else "extractive"
