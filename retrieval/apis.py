"""The tool API: thin views over retrieval.services and retrieval.selectors."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.language import agent_language
from retrieval.selectors import executor_prompt_get, lookup_tool_definition, session_retrievals_get
from retrieval.serializers import (
    LookupRequestSerializer,
    LookupResponseSerializer,
    SessionRetrievalsSerializer,
)
from retrieval.services import lookup_knowledge, session_retrievals_clear
from retrieval.throttling import ToolTokenThrottle
from retrieval.tracker import TrackerUnavailable

INVOCATION_HEADER = "X-Invocation-Id"


class ActionMemoryUnavailable(APIException):
    status_code = 503
    default_detail = "The session action memory is unavailable; try again shortly."
    default_code = "action_memory_unavailable"


class LookupKnowledgeApi(APIView):
    throttle_classes = [ToolTokenThrottle]

    @extend_schema(
        operation_id="lookup_knowledge",
        request=LookupRequestSerializer,
        responses={200: LookupResponseSerializer},
        description="Look up the knowledge base. The recorded invocation's id is in the X-Invocation-Id header.",
    )
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        outcome = lookup_knowledge(
            query=data.get("query"),
            session_id=data.get("session_id"),
            top_k=data.get("top_k"),
            agent=request.user.get_username(),
            language=agent_language(request.user),
        )
        response = Response(outcome.body)
        response[INVOCATION_HEADER] = str(outcome.invocation_id)
        return response

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        invocation_id = getattr(exc, "invocation_id", None)
        if invocation_id is not None:
            response[INVOCATION_HEADER] = str(invocation_id)
        return response


class LookupToolSchemaApi(APIView):
    throttle_classes = [ToolTokenThrottle]

    @extend_schema(
        operation_id="lookup_knowledge_schema",
        responses={200: OpenApiTypes.OBJECT},
        description="lookup_knowledge in the OpenAI function-calling format, for agent frameworks.",
    )
    def get(self, request):
        return Response(lookup_tool_definition(agent_language(request.user)))


class SessionRetrievalsApi(APIView):
    throttle_classes = [ToolTokenThrottle]

    @extend_schema(operation_id="session_retrievals", responses={200: SessionRetrievalsSerializer})
    def get(self, request, session_id: str):
        try:
            return Response({"domains": session_retrievals_get(session_id=session_id)})
        except TrackerUnavailable as exc:
            raise ActionMemoryUnavailable() from exc

    @extend_schema(
        operation_id="session_retrievals_clear", responses={204: OpenApiResponse(description="cleared")}
    )
    def delete(self, request, session_id: str):
        try:
            session_retrievals_clear(session_id=session_id)
        except TrackerUnavailable as exc:
            raise ActionMemoryUnavailable() from exc
        return Response(status=204)


class ExecutorPromptApi(APIView):
    throttle_classes = [ToolTokenThrottle]

    @extend_schema(
        operation_id="executor_prompt",
        responses={(200, "text/markdown"): OpenApiTypes.STR},
        description="The executor prompt with the retrieval constraints (seed 000 FS-5), as Markdown.",
    )
    def get(self, request):
        prompt = executor_prompt_get(agent_language(request.user))
        return HttpResponse(prompt, content_type="text/markdown; charset=utf-8")
