from django.urls import path

from retrieval import apis, dify_apis

app_name = "retrieval"

urlpatterns = [
    path("tools/lookup_knowledge", apis.LookupKnowledgeApi.as_view(), name="lookup-knowledge"),
    path("tools/lookup_knowledge/schema", apis.LookupToolSchemaApi.as_view(), name="lookup-knowledge-schema"),
    # path: session ids are the client's own strings and may contain "/".
    path(
        "sessions/<path:session_id>/retrievals",
        apis.SessionRetrievalsApi.as_view(),
        name="session-retrievals",
    ),
    path("prompts/executor", apis.ExecutorPromptApi.as_view(), name="executor-prompt"),
    # Dify appends "/retrieval" to the endpoint registered there: register ".../api/dify".
    path("dify/retrieval", dify_apis.DifyRetrievalApi.as_view(), name="dify-retrieval"),
]
