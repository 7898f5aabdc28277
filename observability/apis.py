"""The feedback endpoint: agents say whether a lookup's result helped (seed 000 Phase 2)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from observability.feedback import MAX_COMMENT_CHARS, feedback_record
from observability.models import InvocationFeedback


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true / false: "yes", 1 or "0" from a confused client are refused, not guessed."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        self.fail("invalid")


class FeedbackInputSerializer(serializers.Serializer):
    invocation_id = serializers.CharField(
        max_length=64,
        help_text="The opaque id from the lookup's X-Invocation-Id header (MCP: invocationId). "
        "An agent judges only its own invocations.",
    )
    helpful = StrictBooleanField()
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_COMMENT_CHARS, default=""
    )


class FeedbackOutputSerializer(serializers.Serializer):
    # No row id: sequential keys would tell an agent how much feedback others give.
    invocation_id = serializers.CharField()
    helpful = serializers.BooleanField()
    comment = serializers.CharField()
    replaced = serializers.BooleanField(
        help_text="True when this replaced an earlier judgement by the same token."
    )


class LookupFeedbackApi(APIView):
    # Throttled by the project default (DEFAULT_THROTTLE_CLASSES): the agent's one budget.

    @extend_schema(
        operation_id="lookup_knowledge_feedback",
        request=FeedbackInputSerializer,
        responses={201: FeedbackOutputSerializer, 200: FeedbackOutputSerializer},
        description=(
            "Judge whether a lookup_knowledge result helped. One judgement per invocation and token: "
            "sending again replaces it (200); the first one answers 201. Staff calibrate the "
            "relevance thresholds from these judgements."
        ),
    )
    def post(self, request):
        serializer = FeedbackInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        feedback, created = feedback_record(
            invocation_id=serializer.validated_data["invocation_id"],
            helpful=serializer.validated_data["helpful"],
            comment=serializer.validated_data["comment"],
            user=request.user,
            source=InvocationFeedback.Source.AGENT,
        )
        body = FeedbackOutputSerializer(
            {
                "invocation_id": serializer.validated_data["invocation_id"],
                "helpful": feedback.helpful,
                "comment": feedback.comment,
                "replaced": not created,
            }
        ).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
