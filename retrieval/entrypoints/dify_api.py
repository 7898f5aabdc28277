"""``POST /api/dify/retrieval``: Dify's External Knowledge API over retrieval.entrypoints.dify.

Dify's contract, not the project's: ``Authorization: Bearer <tool token>`` and errors as
``{"error_code", "error_msg"}``: 1001 malformed Authorization header (403), 1002 failed key (403),
2001 unknown knowledge_id (404). Codes Dify does not define are agentkb's own: 3001 invalid
body (400), 3002 throttled (429, with ``Retry-After``: the agent's budget, or its address past
API_THROTTLE_FAILED_AUTH failed keys), 3003 body too large (413), 5001 vector
search unavailable (503).

The token's agent is the caller: its throttle budget is the one every agent-facing endpoint
spends, and an agent limited to some domains searches only those (another domain's id answers
as an unknown one).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from config.exception_handlers import _first_message
from retrieval.agents.identity import agent_for_user
from retrieval.agents.throttling import AgentThrottle, failed_auth_spend, refused_keys, request_address
from retrieval.agents.tokens import token_digest, token_lookup
from retrieval.entrypoints.dify import (
    DifyInputError,
    SearchUnavailable,
    UnknownKnowledge,
    dify_error_message,
    dify_retrieve,
)


class DifyError(exceptions.APIException):
    def __init__(self, status: int, error_code: int, message: str):
        self.status_code = status
        self.error_code = error_code
        super().__init__(message)


class DifyBearerAuthentication(BaseAuthentication):
    """The tool token as Dify sends its API key: ``Authorization: Bearer <key>``."""

    def authenticate(self, request):
        scheme, _, key = request.META.get("HTTP_AUTHORIZATION", "").strip().partition(" ")
        key = key.strip()
        if scheme != "Bearer" or not key or " " in key:
            raise DifyError(
                403, 1001, "Invalid Authorization header format. Expected 'Bearer <api-key>' format."
            )
        wait = refused_keys.wait(token_digest(key))  # refused just now: no database lookup
        if wait is not None:
            raise exceptions.Throttled(wait)
        token = token_lookup(key)
        user = token.user if token is not None and token.user.is_active else None
        if user is None:
            # A failed key spends its address's failed keys: past them, 3002 (429) instead.
            wait = failed_auth_spend(request_address(request))
            if wait is not None:
                raise exceptions.Throttled(wait)
            raise DifyError(403, 1002, "Authorization failed")
        return user, token


class DifyBearerScheme(OpenApiAuthenticationExtension):
    """Documents the Bearer scheme in the OpenAPI schema (drf-spectacular cannot guess it)."""

    target_class = "retrieval.entrypoints.dify_api.DifyBearerAuthentication"
    name = "difyBearer"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A tool token, as Dify sends its API key."}


def dify_exception_handler(exc, context):
    headers = {}
    if isinstance(exc, RequestDataTooBig):
        status, code = 413, 3003
        message = (
            f"body: the request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes "
            "(DATA_UPLOAD_MAX_MEMORY_SIZE)"
        )
    elif isinstance(exc, DifyError):
        status, code, message = exc.status_code, exc.error_code, str(exc.detail)
    elif isinstance(exc, DifyInputError):
        status, code, message = 400, 3001, dify_error_message(exc)
    elif isinstance(exc, UnknownKnowledge):
        status, code, message = 404, 2001, str(exc)
    elif isinstance(exc, SearchUnavailable):
        status, code, message = 503, 5001, str(exc)
    elif isinstance(exc, exceptions.Throttled):
        status, code, message = 429, 3002, _first_message(exc.detail)
        headers["Retry-After"] = str(max(1, int(exc.wait or 1)))
    elif isinstance(exc, exceptions.APIException):  # malformed JSON, wrong method...
        status, code, message = exc.status_code, 3001, _first_message(exc.detail)
    else:
        return None
    return Response({"error_code": code, "error_msg": message}, status=status, headers=headers)


class DifyRetrievalApi(APIView):
    authentication_classes = [DifyBearerAuthentication]
    throttle_classes = [AgentThrottle]

    def get_exception_handler(self):
        return dify_exception_handler

    @extend_schema(
        operation_id="dify_retrieval",
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
        description="Dify External Knowledge API: register `<agentkb>/api/dify` as the endpoint, a "
        "tool token as the API key and a domain id (or `*`) as the external knowledge ID.",
    )
    def post(self, request):
        agent = agent_for_user(request.user)
        records = dify_retrieve(body=request.data, agent=agent.name, agent_id=agent.id, domains=agent.domains)
        return Response({"records": records})
