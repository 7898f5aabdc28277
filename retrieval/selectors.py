"""Reads of the retrieval app: a session's action memory, the tool definition, the executor prompt."""

from __future__ import annotations

from django.conf import settings
from django.template.loader import get_template

from retrieval.agents import texts as agent_texts
from retrieval.agents.tracker import get_tracker
from retrieval.services import MAX_SESSION_ID_CHARS, MAX_TOP_K, TOOL_NAME, session_id_clean


def session_retrievals_get(*, session_id: str) -> dict[str, list[str]]:
    """domain -> doc keys this session already has, domains in first-retrieved order."""
    return get_tracker().snapshot(session_id_clean(session_id)).domains


def lookup_tool_definition(language: str | None = None) -> dict:
    """lookup_knowledge in the OpenAI function-calling format (a ``tools`` entry), described in
    the agent's language (None: the global AGENT_LANGUAGE)."""
    t = agent_texts.text
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": t("tool_description", language),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": t("tool_query", language),
                        "minLength": 1,
                        "maxLength": settings.RETRIEVAL_MAX_QUERY_CHARS,
                    },
                    "session_id": {
                        "type": "string",
                        "description": t("tool_session_id", language),
                        "minLength": 1,
                        "maxLength": MAX_SESSION_ID_CHARS,
                    },
                    "top_k": {
                        "type": "integer",
                        "description": t("tool_top_k", language),
                        "minimum": 1,
                        "maximum": MAX_TOP_K,
                    },
                },
                "required": ["query", "session_id"],
                "additionalProperties": False,
            },
        },
    }


def executor_prompt_get(language: str | None = None) -> str:
    """The executor prompt (seed 000 FS-5) in the agent's language, from
    ``templates/prompts/chat_executor_prompt.md`` (``.en.md`` for English)."""
    return get_template(agent_texts.prompt_template("executor", language)).render({})
