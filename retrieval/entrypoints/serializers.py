"""Shapes of the tool API, for the OpenAPI schema. Validation of a lookup lives in the service
(``retrieval.lookup.inputs.lookup_input_clean``) so the API, the ``lookup`` command and hit testing
refuse the same input with the same field-named errors."""

from rest_framework import serializers

from observability.records import RelevanceLevel
from retrieval.agents.scopes import MAX_FILTER_DOMAINS
from retrieval.lookup.inputs import MAX_SESSION_ID_CHARS, MAX_TOP_K


class LookupRequestSerializer(serializers.Serializer):
    query = serializers.CharField(help_text="The question or keyword; at most RETRIEVAL_MAX_QUERY_CHARS.")
    session_id = serializers.CharField(
        required=False,
        max_length=MAX_SESSION_ID_CHARS,
        help_text="The agent's session, for callers that cannot send the X-Session-Id header (the "
        "header is preferred: the framework sets it, the model never sees it).",
    )
    domains = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        min_length=1,
        max_length=MAX_FILTER_DOMAINS,
        help_text="Search only these domains (within the agent's scope). A domain the agent cannot "
        "search is a 400 naming it.",
    )
    metadata_condition = serializers.JSONField(
        required=False,
        help_text="Search only documents whose metadata meet these conditions, in Dify's "
        'metadata_condition shape: {"logical_operator": "and" | "or", "conditions": [{"name", '
        '"comparison_operator", "value"}]}. Applied before ranking, on keyword and vector matches '
        "alike; a malformed condition is a 400 naming the sub-field.",
    )
    top_k = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_TOP_K, help_text="Chunks fetched from Milvus."
    )


class ResultItemSerializer(serializers.Serializer):
    title = serializers.CharField()
    domain = serializers.CharField()
    docKey = serializers.CharField()  # the agent reads camelCase
    headingPath = serializers.CharField()
    pages = serializers.CharField(
        required=False,
        help_text='PDF pages or slides the matched text comes from ("3", "3-4"); paged documents only.',
    )
    content = serializers.CharField()


class LookupResponseSerializer(serializers.Serializer):
    found = serializers.BooleanField()
    primary = ResultItemSerializer(allow_null=True)
    supplement = ResultItemSerializer(many=True)
    relevanceLevel = serializers.ChoiceField(
        choices=[level.value for level in RelevanceLevel], allow_null=True
    )
    completenessHint = serializers.CharField(allow_null=True)
    retrievedDomainsThisSession = serializers.ListField(child=serializers.CharField())
    message = serializers.CharField()


class SessionRetrievalsSerializer(serializers.Serializer):
    domains = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
