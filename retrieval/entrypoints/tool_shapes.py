"""``GET /api/tools/lookup_knowledge/schema`` in each of the OpenAI API's tool shapes.

- ``format=chat`` (default): the Chat Completions ``tools`` entry,
  ``{"type": "function", "function": {name, description, parameters}}``;
- ``format=responses``: the Responses API's flat ``FunctionToolParam``,
  ``{"type": "function", name, description, parameters, strict}``;
- ``strict=true`` (either shape): strict mode (Structured Outputs) as the API requires it: every
  property listed in ``required`` (optional ones become nullable: ``top_k`` null = the default),
  ``additionalProperties: false``, and no validation keywords strict mode does not accept
  (``minLength``, ``maxLength``, ``minimum``, ``maximum``): those limits move into the
  descriptions, and the lookup still enforces them.
"""

from __future__ import annotations

import copy
from typing import Any

from django.core.exceptions import ValidationError

from retrieval.agents import texts as agent_texts
from retrieval.selectors import lookup_tool_definition

FORMATS = ("chat", "responses")
#: The JSON schema keywords a strict tool's parameters keep.
STRICT_KEYWORDS = frozenset(
    {"type", "description", "properties", "required", "additionalProperties", "enum", "items", "anyOf"}
)
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")


def tool_shape_params_clean(params) -> tuple[str, bool]:
    """``(format, strict)`` from the query string; ValidationError naming the parameter."""
    shape = (params.get("format") or "chat").strip().lower()
    if shape not in FORMATS:
        raise ValidationError({"format": [f"must be one of: {', '.join(FORMATS)}"]})
    strict = (params.get("strict") or "").strip().lower()
    if strict not in _TRUE + _FALSE:
        raise ValidationError({"strict": ["must be true or false"]})
    return shape, strict in _TRUE


def _limits_text(schema: dict, language: str | None) -> str:
    if "minLength" in schema or "maxLength" in schema:
        return agent_texts.text(
            "strict_length", language, min=schema.get("minLength", 0), max=schema.get("maxLength", "∞")
        )
    if "minimum" in schema or "maximum" in schema:
        return agent_texts.text(
            "strict_range", language, min=schema.get("minimum", "-∞"), max=schema.get("maximum", "∞")
        )
    return ""


def strict_parameters(parameters: dict, language: str | None = None) -> dict:
    """``parameters`` (an object schema) as strict mode accepts it (see the module docstring)."""
    required = set(parameters.get("required", []))
    properties = {}
    for name, schema in parameters["properties"].items():
        description = schema.get("description", "") + _limits_text(schema, language)
        strict = {k: copy.deepcopy(v) for k, v in schema.items() if k in STRICT_KEYWORDS}
        if name not in required:
            strict["type"] = [schema["type"], "null"]
            description += agent_texts.text("strict_nullable", language)
        strict["description"] = description
        properties[name] = strict
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def lookup_tool_shape(
    *, shape: str = "chat", strict: bool = False, language: str | None = None
) -> dict[str, Any]:
    """lookup_knowledge as a tool of the Chat Completions or the Responses API."""
    function = lookup_tool_definition(language)["function"]
    if strict:
        function = {
            **function,
            "parameters": strict_parameters(function["parameters"], language),
            "strict": True,
        }
    if shape == "chat":
        return {"type": "function", "function": function}
    return {
        "type": "function",
        "name": function["name"],
        "description": function["description"],
        "parameters": function["parameters"],
        "strict": strict,
    }
