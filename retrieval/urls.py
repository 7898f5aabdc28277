from django.urls import path

from retrieval.entrypoints import dify_api, knowledge_map, rest

app_name = "retrieval"

urlpatterns = [
    path("tools/lookup_knowledge", rest.LookupKnowledgeApi.as_view(), name="lookup-knowledge"),
    path("tools/lookup_knowledge/schema", rest.LookupToolSchemaApi.as_view(), name="lookup-knowledge-schema"),
    # path: session ids are the client's own strings and may contain "/".
    path(
        "sessions/<path:session_id>/retrievals",
        rest.SessionRetrievalsApi.as_view(),
        name="session-retrievals",
    ),
    path("prompts/executor", rest.ExecutorPromptApi.as_view(), name="executor-prompt"),
    path("knowledge-map", knowledge_map.KnowledgeMapApi.as_view(), name="knowledge-map"),
    path("prompts/planner", knowledge_map.PlannerPromptApi.as_view(), name="planner-prompt"),
    # Dify appends "/retrieval" to the endpoint registered there: register ".../api/dify".
    path("dify/retrieval", dify_api.DifyRetrievalApi.as_view(), name="dify-retrieval"),
]
