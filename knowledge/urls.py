from django.urls import path

from knowledge.apis import KnowledgeMapApi, PlannerPromptApi

app_name = "knowledge"

urlpatterns = [
    path("knowledge-map", KnowledgeMapApi.as_view(), name="knowledge-map"),
    path("prompts/planner", PlannerPromptApi.as_view(), name="planner-prompt"),
]
