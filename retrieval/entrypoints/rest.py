"""The tool API: thin views over retrieval.services and retrieval.selectors."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.agents.identity import agent_for_user
from retrieval.agents.language import agent_language
from retrieval.agents.throttling import AgentThrottle
from retrieval.agents.tracker import TrackerUnavailable
from retrieval.entrypoints.serializers import (
    LookupRequestSerializer,
    LookupResponseSerializer,
    SessionRetrievalsSerializer,
)
from retrieval.entrypoints.tool_shapes import FORMATS, lookup_tool_shape, tool_shape_params_clean
from retrieval.selectors import agent_session_retrievals_get, executor_prompt_get
from retrieval.services import agent_session_retrievals_clear, lookup_knowledge

INVOCATION_HEADER = "X-Invocation-Id"
#: The agent framework's session id: set by the framework, never by the model (seed 004: the
#: session lives in the context holder, not in the tool's arguments).
SESSION_HEADER = "X-Session-Id"
#: What a lookup's body may hold; ``session_id`` is for callers that cannot set the header.
LOOKUP_FIELDS = frozenset({"query", "session_id", "top_k", "domains", "metadata_condition"})


class ActionMemoryUnavailable(APIException):
    status_code = 503
    default_detail = "The session action memory is unavailable; try again shortly."
    default_code = "action_memory_unavailable"


class LookupKnowledgeApi(APIView):
    throttle_classes = [AgentThrottle]

    @extend_schema(
        operation_id="lookup_knowledge",
        request=LookupRequestSerializer,
        responses={200: LookupResponseSerializer},
        description="Look up the knowledge base. The recorded invocation's id (an opaque string, for "
        "the feedback endpoint) is in the X-Invocation-Id header.",
    )
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        agent = agent_for_user(request.user)
        outcome = lookup_knowledge(
            query=data.get("query"),
            session_id=request_session_id(request, data),
            top_k=data.get("top_k"),
            agent=agent.name,
            agent_id=agent.id,
            domains=agent.domains,
            language=agent.language_in_force,
            filter_domains=data.get("domains"),
            metadata_condition=data.get("metadata_condition"),
            unknown_fields=tuple(sorted(str(key)[:64] for key in data if key not in LOOKUP_FIELDS)),
        )
        response = Response(outcome.body)
        response[INVOCATION_HEADER] = outcome.invocation_public_id
        return response

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        invocation_id = getattr(exc, "invocation_public_id", None)
        if invocation_id is not None:
            response[INVOCATION_HEADER] = invocation_id
        return response


def request_session_id(request, data: dict):
    """The session: the ``X-Session-Id`` header, else the body's ``session_id``. Both, differing,
    is a 400 naming ``session_id`` (a model that invents an id must not split the framework's
    session silently)."""
    header = request.headers.get(SESSION_HEADER)
    body = data.get("session_id")
    if header is None:
        return body
    if body is not None and body != header:
        raise ValidationError(
            {"session_id": [f"Differs from the {SESSION_HEADER} header: send the session in one place."]}
        )
    return header


class ToolShapeNegotiation(DefaultContentNegotiation):
    """JSON always: ``?format=`` names the tool shape here, not a renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class LookupToolSchemaApi(APIView):
    throttle_classes = [AgentThrottle]
    content_negotiation_class = ToolShapeNegotiation

    @extend_schema(
        operation_id="lookup_knowledge_schema",
        parameters=[
            OpenApiParameter("format", OpenApiTypes.STR, enum=list(FORMATS), default="chat"),
            OpenApiParameter("strict", OpenApiTypes.BOOL, default=False),
        ],
        responses={200: OpenApiTypes.OBJECT},
        description="lookup_knowledge as an OpenAI tool, for agent frameworks: `format=chat` (Chat "
        "Completions `tools` entry, the default) or `format=responses` (the Responses API's flat "
        "function tool); `strict=true` for strict mode (every property required, limits in the "
        "descriptions).",
    )
    def get(self, request):
        try:
            shape, strict = tool_shape_params_clean(request.query_params)
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None
        return Response(lookup_tool_shape(shape=shape, strict=strict, language=agent_language(request.user)))


class SessionRetrievalsApi(APIView):
    throttle_classes = [AgentThrottle]

    """A session of the calling agent: another agent's session of the same id is another session."""

    @extend_schema(operation_id="session_retrievals", responses={200: SessionRetrievalsSerializer})
    def get(self, request, session_id: str):
        try:
            domains = agent_session_retrievals_get(agent=agent_for_user(request.user), session_id=session_id)
            return Response({"domains": domains})
        except TrackerUnavailable as exc:
            raise ActionMemoryUnavailable() from exc

    @extend_schema(
        operation_id="session_retrievals_clear", responses={204: OpenApiResponse(description="cleared")}
    )
    def delete(self, request, session_id: str):
        try:
            agent_session_retrievals_clear(agent=agent_for_user(request.user), session_id=session_id)
        except TrackerUnavailable as exc:
            raise ActionMemoryUnavailable() from exc
        return Response(status=204)


class ExecutorPromptApi(APIView):
    throttle_classes = [AgentThrottle]

    @extend_schema(
        operation_id="executor_prompt",
        responses={(200, "text/markdown"): OpenApiTypes.STR},
        description="The executor prompt with the retrieval constraints (seed 000 FS-5), as Markdown.",
    )
    def get(self, request):
        prompt = executor_prompt_get(agent_language(request.user))
        return HttpResponse(prompt, content_type="text/markdown; charset=utf-8")
