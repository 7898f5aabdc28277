from django.urls import path

from observability import apis

app_name = "observability"

urlpatterns = [
    path("tools/lookup_knowledge/feedback", apis.LookupFeedbackApi.as_view(), name="lookup-feedback"),
]
