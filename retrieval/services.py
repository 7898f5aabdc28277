"""The lookup_knowledge tool (seed 000, FS-1..FS-6) and the session action-memory services.

``lookup_knowledge(*, query, session_id, top_k=None, dry_run=False, agent="", source="api")``
    Run one lookup and return a ``LookupOutcome``:
    - ``body``: exactly what the agent gets (camelCase: found, primary, supplement,
      relevanceLevel, completenessHint, retrievedDomainsThisSession, message). No scores.
    - ``details``: the ``retrieval_details`` JSON (raw L1 scores, similarities, L0 matches, the
      L1 candidates with doc_key / domain / chunk / raw score / similarity / title, what was
      returned and withheld, thresholds in force, timings). Staff pages show it; agents never.
    - ``invocation_id``: the ToolInvocation written for the call (None on a dry run).
    ``dry_run=True`` (hit testing) neither marks the session nor records an invocation; the body
    shows ``retrievedDomainsThisSession`` as the call would have left it.
    Bad input raises ``LookupInputError`` (a ValidationError naming the field) after recording the
    failed call. When vector search or the action memory is down the lookup still answers from
    what works, with status DEGRADED: without Milvus from the keyword index (L0) alone, with a
    message saying semantic search is unavailable; without Redis on this process's own action
    memory (``retrieval.agents.tracker.fallback_tracker``, recorded as ``action_memory: memory-fallback``
    in the details). Any other failure is recorded as ERROR and re-raised.

The parts: input cleaning (``retrieval.lookup.inputs``), the pipeline (``retrieval.lookup.pipeline``),
what the agent reads (``retrieval.lookup.presenter``), the one place a call is recorded
(``retrieval.recording``: one ToolInvocation, one INSERT) and the ``retrieval_details`` keys
(``observability.records``). This module ties them together.

``agent_session_retrievals_clear(*, agent, session_id)``: forget what an agent's session has retrieved.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from retrieval.agents import texts as agent_texts
from retrieval.agents.identity import Agent, memory_session_key
from retrieval.agents.scopes import call_domains_clean
from retrieval.agents.tracker import get_tracker
from retrieval.lookup.inputs import (
    MAX_SESSION_ID_CHARS,
    lookup_input_clean,
    recorded_value,
    session_id_clean,
)
from retrieval.lookup.metadata_conditions import MetadataCondition, metadata_condition_clean
from retrieval.lookup.pipeline import lookup_run
from retrieval.recording import answered_call_record, failed_call_record, refused_call_record


class LookupInputError(ValidationError):
    """Bad input, naming the field. ``invocation_id`` is the recorded failed call, if any."""

    invocation_id: int | None = None
    invocation_public_id: str | None = None


@dataclass(frozen=True)
class LookupOutcome:
    body: dict[str, Any]
    details: dict[str, Any]
    invocation_id: int | None
    status: str
    invocation_public_id: str | None = None  # what the agent sees (retrieval.agents.identity)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def lookup_knowledge(
    *,
    query: Any,
    session_id: Any,
    top_k: Any = None,
    dry_run: bool = False,
    agent: str = "",
    source: str = "api",
    agent_id: int | None = None,
    domains: frozenset[str] | None = None,
    language: str | None = None,
    filter_domains: Any = None,
    metadata_condition: Any = None,
    unknown_fields: tuple[str, ...] = (),
) -> LookupOutcome:
    """One lookup_knowledge call (see the module docstring). ``agent_id`` keys the session's action
    memory by agent (``retrieval.agents.identity``); ``domains`` limits what it sees (``retrieval.agents.scopes``);
    ``language``: the agent's (retrieval.agents.language.agent_language), None for the global
    AGENT_LANGUAGE. ``filter_domains``: the call's own ``domains`` filter, within ``domains``
    (``call_domains_clean``); ``metadata_condition``: the call's condition on document metadata,
    in Dify's language (``retrieval.lookup.metadata_conditions``), applied before ranking on L0 and
    L1; ``unknown_fields``: fields the caller sent that the tool does not take, each refused by
    name."""
    started = time.perf_counter()
    request = {
        "query": recorded_value(query),
        "session_id": recorded_value(session_id),
        "top_k": recorded_value(top_k),
    }
    if filter_domains is not None:
        request["domains"] = _recorded_domains(filter_domains)
    if metadata_condition is not None:
        request["metadata_condition"] = _recorded_condition(metadata_condition)
    if agent:
        request["agent"] = agent
    if source:
        request["source"] = source
    recorded_session = (
        recorded_value(session_id.strip())[:MAX_SESSION_ID_CHARS] if isinstance(session_id, str) else ""
    )

    try:
        clean_query, clean_session, clean_top_k, domains, condition = _input_clean(
            query=query,
            session_id=session_id,
            top_k=top_k,
            scope=domains,
            filter_domains=filter_domains,
            metadata_condition=metadata_condition,
            unknown_fields=unknown_fields,
        )
    except ValidationError as exc:
        error = LookupInputError(exc.message_dict)
        if not dry_run:
            invocation = refused_call_record(
                session_id=recorded_session,
                request=request,
                duration_ms=round(_ms(time.perf_counter() - started)),
                errors=exc.message_dict,
                agent_id=agent_id,
            )
            error.invocation_id, error.invocation_public_id = invocation.pk, invocation.public_id
        raise error from None

    try:
        run = lookup_run(
            query=clean_query,
            session_id=memory_session_key(agent_id=agent_id, agent=agent, session_id=clean_session),
            top_k=clean_top_k,
            dry_run=dry_run,
            started=started,
            domains=domains,
            language=agent_texts.language_or_default(language),
            metadata_condition=condition,
        )
    except Exception as exc:
        if not dry_run:
            failed_call_record(
                session_id=clean_session,
                request=request,
                duration_ms=round(_ms(time.perf_counter() - started)),
                query=clean_query,
                exc=exc,
                agent_id=agent_id,
            )
        raise

    if dry_run:
        return LookupOutcome(run.body, run.details, None, run.status)
    invocation = answered_call_record(
        session_id=clean_session,
        request=request,
        status=run.status,
        body=run.body,
        details=run.details,
        agent_id=agent_id,
    )
    return LookupOutcome(run.body, run.details, invocation.pk, run.status, invocation.public_id)


def _recorded_domains(raw: Any) -> Any:
    """The ``domains`` filter as the agent sent it: a list stays a list (staff read and search it),
    each entry recorded as any value is, at most 50 of them."""
    if isinstance(raw, list):
        return [recorded_value(item) for item in raw[:50]]
    return recorded_value(raw)


def _recorded_condition(raw: Any) -> Any:
    """The condition as the agent sent it, kept as JSON when it is small (staff read it)."""
    try:
        text = json.dumps(raw)
    except (TypeError, ValueError):
        return recorded_value(raw)
    return raw if len(text) <= 4000 else recorded_value(text)


def _input_clean(*, query, session_id, top_k, scope, filter_domains, metadata_condition, unknown_fields):
    """``(query, session, top_k, domains, condition)`` cleaned; one ValidationError naming every
    field at fault (a malformed condition names its sub-field: ``metadata_condition.conditions[0].value``)."""
    errors: dict[str, list[str]] = {
        field: ["Unknown field: lookup_knowledge takes query, domains, metadata_condition and top_k."]
        for field in unknown_fields
    }
    cleaned: tuple[str, str, int] = ("", "", 0)
    try:
        cleaned = lookup_input_clean(query=query, session_id=session_id, top_k=top_k)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        scope = call_domains_clean(filter_domains, scope)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    condition: MetadataCondition | None = None
    if metadata_condition is not None:
        try:
            condition = metadata_condition_clean(metadata_condition)
        except ValidationError as exc:
            errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    return (*cleaned, scope, condition)


def agent_session_retrievals_clear(*, agent: Agent, session_id: str) -> None:
    """Forget everything this agent's session has retrieved (seed clearSession)."""
    get_tracker().clear_session(agent.memory_key(session_id_clean(session_id)))
