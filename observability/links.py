"""URLs into the invocation list, filtered: what every chart bar and dashboard link opens."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django.urls import reverse
from django.utils import timezone

from observability.rollups import NO_AGENT

CHANGELIST = "admin:observability_toolinvocation_changelist"


def invocation_list_url(**params) -> str:
    """The invocation list filtered by ``params`` (the changelist's own filter parameters)."""
    query = {k: v for k, v in params.items() if v is not None and v != ""}
    return reverse(CHANGELIST) + ("?" + urlencode(query) if query else "")


def iso(moment: datetime) -> str:
    return timezone.localtime(moment).isoformat(timespec="seconds")


def agent_params(agent: int | None) -> dict:
    """The list's agent filter: one agent's id, or calls without one (NO_AGENT)."""
    if agent is None:
        return {}
    if agent == NO_AGENT:
        return {"agent__isnull": "True"}
    return {"agent__id__exact": agent}


def scope(filters) -> dict:
    """The list parameters that reproduce a dashboard's time range, tool, domain and agent."""
    return {
        "from": iso(filters.start),
        "to": iso(filters.end),
        "tool_name": filters.tool_name,
        "domain": filters.domain,
        **agent_params(getattr(filters, "agent", None)),
    }
