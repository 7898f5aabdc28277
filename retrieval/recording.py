"""The one place an agent's call is recorded: one ToolInvocation per call (FS-6). A lookup_knowledge
call (REST and MCP alike, through ``retrieval.services.lookup_knowledge``) refused on its input,
failed, or answered; and a Dify retrieval call, whatever its outcome."""

from __future__ import annotations

import logging
from typing import Any

from observability import records as keys
from observability.models import ToolInvocation
from observability.records import ToolName
from observability.services import invocation_record
from retrieval.lookup.presenter import invocation_summary

logger = logging.getLogger(__name__)

TOOL_NAME = ToolName.LOOKUP


def refused_call_record(
    *, session_id: str, request: dict, duration_ms: int, errors: dict, agent_id: int | None = None
) -> ToolInvocation:
    """Record a call refused on its input; return the invocation."""
    invocation = invocation_record(
        tool_name=TOOL_NAME,
        session_id=session_id,
        request=request,
        status=ToolInvocation.Status.ERROR,
        duration_ms=duration_ms,
        result_summary="invalid input",
        error="; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in errors.items()),
        agent_id=agent_id,
    )
    return invocation


def failed_call_record(
    *,
    session_id: str,
    request: dict,
    duration_ms: int,
    query: str,
    exc: Exception,
    agent_id: int | None = None,
) -> None:
    """Record a call that failed; never raises (the database itself may be what failed)."""
    error = f"{type(exc).__name__}: {exc}"
    try:
        invocation_record(
            tool_name=TOOL_NAME,
            session_id=session_id,
            request=request,
            status=ToolInvocation.Status.ERROR,
            duration_ms=duration_ms,
            result_summary="error",
            error=error,
            retrieval_details=keys.failed_lookup_details(query=query, error=error),
            agent_id=agent_id,
        )
    except Exception:  # the original error is the one that matters
        logger.exception("could not record the failed lookup")


def answered_call_record(
    *,
    session_id: str,
    request: dict,
    status: str,
    body: dict,
    details: dict[str, Any],
    agent_id: int | None = None,
) -> ToolInvocation:
    """Record a call that answered (found or not); return the invocation."""
    invocation = invocation_record(
        tool_name=TOOL_NAME,
        session_id=session_id,
        request=request,
        status=status,
        duration_ms=round(details[keys.TIMINGS]["total_ms"]),
        result_summary=invocation_summary(body, details),
        error="; ".join(details[keys.DEGRADED]),
        relevance_level=details[keys.RELEVANCE_LEVEL],
        dedup_reason=details[keys.DEDUP_REASON],
        retrieval_details=details,
        agent_id=agent_id,
    )
    return invocation


def dify_call_record(
    *,
    request: dict,
    status: str,
    duration_ms: int,
    summary: str,
    error: str = "",
    details: dict[str, Any] | None = None,
    agent_id: int | None = None,
) -> ToolInvocation:
    """Record a call of Dify's retrieval endpoint (it has no session)."""
    return invocation_record(
        tool_name=ToolName.DIFY,
        session_id="",
        request=request,
        status=status,
        duration_ms=duration_ms,
        result_summary=summary,
        error=error,
        retrieval_details=details,
        agent_id=agent_id,
    )
