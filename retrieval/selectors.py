"""Reads of the retrieval app: what an agent's session has retrieved, the tool definition, and the
executor and planner prompts.

Session ids are the agent's own: ``conv-42`` of one agent and ``conv-42`` of another are two
sessions (``retrieval.agents.identity.memory_session_key``). A scoped agent sees only its domains.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.template.loader import get_template

from knowledge.selectors import knowledge_map_yaml
from retrieval.agents import texts as agent_texts
from retrieval.agents.identity import Agent
from retrieval.agents.scopes import MAX_FILTER_DOMAINS, memory_scoped
from retrieval.agents.tracker import get_tracker
from retrieval.lookup.inputs import MAX_TOP_K, session_id_clean
from retrieval.lookup.metadata_conditions import OPERATORS
from retrieval.recording import TOOL_NAME


def agent_session_retrievals_get(*, agent: Agent, session_id: str) -> dict[str, list[str]]:
    """domain -> doc keys this agent's session already has, domains in first-retrieved order."""
    memory = get_tracker().snapshot(agent.memory_key(session_id_clean(session_id)))
    return memory_scoped(memory, agent.domains).domains


def metadata_condition_schema(description: str) -> dict:
    """The JSON schema of a call's ``metadata_condition`` (Dify's shape, as
    ``retrieval.lookup.metadata_conditions`` parses it). Every nested property is required and
    closed, so the schema also holds in the OpenAI API's strict mode; the lookup itself accepts
    what Dify sends (``logical_operator`` left out means "and", a list of names)."""
    return {
        "type": "object",
        "description": description,
        "properties": {
            "logical_operator": {"type": "string", "enum": ["and", "or"]},
            "conditions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "comparison_operator": {"type": "string", "enum": list(OPERATORS)},
                        "value": {
                            "anyOf": [
                                {"type": "string"},
                                {"type": "number"},
                                {"type": "array", "items": {"type": "string"}},
                                {"type": "null"},
                            ]
                        },
                    },
                    "required": ["name", "comparison_operator", "value"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["logical_operator", "conditions"],
        "additionalProperties": False,
    }


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
                    "domains": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": t("tool_domains", language),
                        "minItems": 1,
                        "maxItems": MAX_FILTER_DOMAINS,
                    },
                    "metadata_condition": metadata_condition_schema(t("tool_metadata_condition", language)),
                    "top_k": {
                        "type": "integer",
                        "description": t("tool_top_k", language),
                        "minimum": 1,
                        "maximum": MAX_TOP_K,
                    },
                },
                # No session_id: the framework sends the session (X-Session-Id, the MCP session),
                # never the model (the body field stays accepted for callers without headers).
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }


def executor_prompt_get(language: str | None = None) -> str:
    """The executor prompt (seed 000 FS-5) in the agent's language, from
    ``templates/prompts/chat_executor_prompt.md`` (``.en.md`` for English)."""
    return get_template(agent_texts.prompt_template("executor", language)).render({})


# The planner prompt's placeholder for the knowledge map (seed 004 Part B).
KNOWLEDGE_MAP_PLACEHOLDER = "{{ knowledge_map }}"


def _template_path(name: str) -> Path:
    for folder in settings.TEMPLATES[0]["DIRS"]:
        candidate = Path(folder) / name
        if candidate.exists():
            return candidate
    raise FileNotFoundError(name)


def planner_prompt_render(knowledge_map: dict | None = None, language: str | None = None) -> str:
    """The planner prompt, in the agent's language (None: AGENT_LANGUAGE), with the knowledge map
    (YAML) injected at its placeholder.

    Plain substitution, not the Django template engine: the prompt is Markdown for an LLM and
    must not be HTML-escaped.
    """
    template = _template_path(agent_texts.prompt_template("planner", language)).read_text(encoding="utf-8")
    return template.replace(KNOWLEDGE_MAP_PLACEHOLDER, knowledge_map_yaml(knowledge_map).rstrip("\n"))
