"""Indexing progress a staff user can watch: a small JSON endpoint the document list polls while
any listed document is pending or indexing (no page reload), and the document page's re-index
button."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.text import Truncator
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST

from knowledge.models import ApiDocument
from knowledge.services.reindex import documents_reindex

# Ids one poll may ask about (a page lists at most a few hundred).
MAX_POLLED = 500


def status_urls(model_admin) -> list:
    site = model_admin.admin_site

    @require_GET
    def status_view(request: HttpRequest) -> JsonResponse:
        if not model_admin.has_view_permission(request):
            raise PermissionDenied
        try:
            ids = [int(i) for i in request.GET.get("ids", "").split(",") if i][:MAX_POLLED]
        except ValueError:
            return JsonResponse({"error": "ids: expected comma-separated document ids"}, status=400)
        rows = ApiDocument.objects.filter(pk__in=ids).values_list("pk", "status", "error", "chunk_count")
        labels = dict(ApiDocument.Status.choices)
        return JsonResponse(
            {
                "documents": {
                    str(pk): {
                        "status": status,
                        "label": str(labels.get(status, status)),
                        "error": Truncator(error).chars(300) if status == ApiDocument.Status.FAILED else "",
                        "chunk_count": chunks,
                    }
                    for pk, status, error, chunks in rows
                }
            }
        )

    @require_POST
    def reindex_view(request: HttpRequest, object_id: int) -> HttpResponseRedirect:
        if not model_admin.has_change_permission(request):
            raise PermissionDenied
        document = get_object_or_404(ApiDocument, pk=object_id)
        documents_reindex(document_ids=[document.pk])
        messages.success(request, gettext("Re-indexing queued: the status updates by itself."))
        return HttpResponseRedirect(reverse("admin:knowledge_apidocument_change", args=[document.pk]))

    return [
        path("status.json", site.admin_view(status_view), name="knowledge_apidocument_status"),
        path("<int:object_id>/reindex/", site.admin_view(reindex_view), name="knowledge_apidocument_reindex"),
    ]
