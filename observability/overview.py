"""The admin home's overview: how things are, in four small reads (documents by status, the
failing ones, domains left without documents, lookups of the last day by level)."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count
from django.urls import reverse
from django.utils import timezone

from knowledge.models import ApiDocument, KnowledgeDomain
from observability import selectors
from observability.links import invocation_list_url, iso
from observability.metrics import LOOKUP_TOOL, InvocationFilter


def admin_overview() -> dict:
    documents = reverse("admin:knowledge_apidocument_changelist")
    counts = dict(ApiDocument.objects.values_list("status").annotate(n=Count("*")).order_by())
    by_status = [
        {
            "value": value,
            "label": label,
            "count": counts.get(value, 0),
            "url": f"{documents}?status__exact={value}",
        }
        for value, label in ApiDocument.Status.choices
    ]
    failing = list(
        ApiDocument.objects.filter(status=ApiDocument.Status.FAILED)
        .order_by("-pk")
        .values("pk", "doc_key", "error")[:5]
    )
    for row in failing:
        row["url"] = reverse("admin:knowledge_apidocument_change", args=[row["pk"]])
    used = set(ApiDocument.objects.values_list("domain", flat=True).distinct())
    empty_domains = [
        {"domain_id": d, "pk": pk, "url": reverse("admin:knowledge_knowledgedomain_delete", args=[pk])}
        for pk, d in KnowledgeDomain.objects.order_by("domain_id").values_list("pk", "domain_id")
        if d not in used
    ]
    now = timezone.now()
    day = InvocationFilter(start=now - timedelta(days=1), end=now, tool_name=LOOKUP_TOOL)
    levels = selectors.relevance_distribution(qs=selectors.invocations_filtered(filters=day))
    scope = {"from": iso(day.start), "to": iso(day.end), "tool_name": LOOKUP_TOOL}
    for row in levels:
        row["url"] = invocation_list_url(**scope, level=row["value"] or "none")
    return {
        "documents": by_status,
        "failing": failing,
        "empty_domains": empty_domains,
        "levels": levels,
        "lookups": sum(row["count"] for row in levels),
    }
