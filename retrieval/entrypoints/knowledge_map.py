"""REST endpoints for planners: the knowledge map and the planner prompt.

Same auth as the tool endpoint (DRF token, the project default) and the same per-agent
throttle budget (the project default). An agent limited to some domains sees only those
(``retrieval.agents.scopes``). Errors are always JSON in the project's one error format, whatever
format the success body has.
"""

from __future__ import annotations

import yaml
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, renderers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge.selectors import knowledge_map_yaml
from retrieval.agents.language import agent_language
from retrieval.agents.scopes import agent_knowledge_map
from retrieval.selectors import planner_prompt_render


class YAMLRenderer(renderers.BaseRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        if isinstance(data, dict) and "available_knowledge_domains" in data:
            return knowledge_map_yaml(data).encode("utf-8")
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode("utf-8")


class MarkdownRenderer(renderers.BaseRenderer):
    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict):
            data = data.get("content", "")
        return (data or "").encode("utf-8")


class FormatParameterNegotiation(DefaultContentNegotiation):
    """``?format=`` picks the body format; an unknown one is a 400 naming the parameter
    (DRF's default answers 404)."""

    def filter_renderers(self, renderers, format):
        chosen = [r for r in renderers if r.format == format]
        if not chosen:
            allowed = ", ".join(r.format for r in renderers)
            raise exceptions.ValidationError({"format": [f"must be one of: {allowed}"]})
        return chosen


class _ToolApi(APIView):
    # Throttled by the project default (DEFAULT_THROTTLE_CLASSES): the agent's one budget.
    content_negotiation_class = FormatParameterNegotiation

    def finalize_response(self, request, response, *args, **kwargs):
        if response.status_code >= 400:
            # One error format for the whole API: JSON, even where success is YAML or Markdown.
            request.accepted_renderer = renderers.JSONRenderer()
            request.accepted_media_type = request.accepted_renderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


def _format_parameter(*formats: str) -> OpenApiParameter:
    return OpenApiParameter(
        "format",
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        required=False,
        enum=list(formats),
        default=formats[0],
    )


class KnowledgeMapApi(_ToolApi):
    """The planner's knowledge map: every domain with documents, its guidance and documents."""

    renderer_classes = [YAMLRenderer, renderers.JSONRenderer]

    @extend_schema(
        operation_id="knowledge_map",
        parameters=[_format_parameter("yaml", "json")],
        description="The knowledge map injected into the planner prompt (seed 004): YAML by "
        "default, `?format=json` for JSON.",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        return Response(agent_knowledge_map(request.user))


class PlannerPromptApi(_ToolApi):
    """The planner prompt with the current knowledge map injected."""

    renderer_classes = [MarkdownRenderer, renderers.JSONRenderer]

    @extend_schema(
        operation_id="planner_prompt",
        parameters=[_format_parameter("md", "json")],
        description="The planner prompt (Markdown) with the knowledge map injected; "
        '`?format=json` gives `{"name": "planner", "content": "..."}`.',
        responses={(200, "text/markdown"): OpenApiTypes.STR, (200, "application/json"): OpenApiTypes.OBJECT},
    )
    def get(self, request):
        content = planner_prompt_render(
            agent_knowledge_map(request.user), language=agent_language(request.user)
        )
        return Response({"name": "planner", "content": content})
