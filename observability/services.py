"""Recording tool calls (seed 000 FS-6): one ToolInvocation row per call, written by the service
that acted (``retrieval.services.lookup_knowledge``), successful or not.

The dashboards read these rows; ``retrieval_details`` carries what they group by (see the keys
the lookup writes in ``retrieval.services``).
"""

from __future__ import annotations

from typing import Any

from config.credentials import mask_credentials
from observability.models import ToolInvocation
from observability.prometheus import lookup_count

# Stored text is capped so one runaway query or error cannot bloat the table.
_MAX_SUMMARY = 2000
_MAX_ERROR = 4000


def invocation_record(
    *,
    tool_name: str,
    session_id: str,
    request: dict[str, Any],
    status: str,
    duration_ms: int,
    result_summary: str = "",
    error: str = "",
    relevance_level: str | None = None,
    dedup_reason: str | None = None,
    retrieval_details: dict[str, Any] | None = None,
    agent_id: int | None = None,
) -> ToolInvocation:
    """Write one invocation row and return it.

    ``agent_id`` is the calling agent's user (None: a call without a tool token). The error and
    summary are stored with credentials masked (an unreachable Milvus's URI with its password).
    Exactly one INSERT and no transaction of its own: wrapping a single statement in
    ``transaction.atomic`` would add BEGIN/COMMIT round trips to every lookup for nothing.
    The call is counted for Prometheus (``agentkb_lookups_total``) once its row is written.
    """
    if status not in ToolInvocation.Status.values:
        raise ValueError(f"status: must be one of {', '.join(ToolInvocation.Status.values)}; got {status!r}")
    invocation = ToolInvocation.objects.create(
        tool_name=tool_name,
        session_id=session_id[:128],
        request=request,
        status=status,
        duration_ms=max(0, int(duration_ms)),
        result_summary=mask_credentials(result_summary)[:_MAX_SUMMARY],
        error=mask_credentials(error)[:_MAX_ERROR],
        relevance_level=relevance_level,
        dedup_reason=dedup_reason,
        retrieval_details=retrieval_details,
        agent_id=agent_id,
    )
    lookup_count(
        tool=tool_name,
        level=relevance_level,
        dedup_reason=dedup_reason,
        status=status,
        agent_id=agent_id,
        duration_ms=duration_ms,
    )
    return invocation
