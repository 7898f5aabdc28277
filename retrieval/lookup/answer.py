"""Stage "answer": what the agent reads (FS-4): the level of what is returned, its completeness
hint and message in the agent's language, and the body, without a score; and the call's status,
DEGRADED when any stage answered from less than it should have."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from observability.models import ToolInvocation
from observability.records import RelevanceLevel
from retrieval.lookup.candidates import ChunkCandidates
from retrieval.lookup.marking import Marked
from retrieval.lookup.memory import MemoryRead
from retrieval.lookup.normalisation import completeness_hint
from retrieval.lookup.presenter import agent_body
from retrieval.lookup.ranking import Selection
from retrieval.lookup.request import LookupRequest
from retrieval.lookup.results import message_build


@dataclass(frozen=True)
class Answer:
    body: dict[str, Any]
    level: RelevanceLevel | None
    hint: str | None
    #: what did not answer, in stage order (memory, vector search, marking)
    degraded: list[str]
    #: ToolInvocation.Status: SUCCESS, or DEGRADED with ``degraded`` saying why
    status: str


def answer_build(
    request: LookupRequest,
    selection: Selection,
    items: list[dict],
    memory: MemoryRead,
    marked: Marked,
    chunks: ChunkCandidates,
) -> Answer:
    degraded = [*memory.degraded, *chunks.degraded, *marked.degraded]
    hint = completeness_hint(selection.level, request.language)
    message = message_build(
        selection=selection,
        domains_before=marked.domains_before,
        held_in_blocked_domain=memory.memory.domains.get(selection.blocked_domain or "", []),
        domain_dedup=request.domain_dedup,
        degraded=bool(degraded),
        vector_search_down=chunks.down,
        language=request.language,
    )
    body = agent_body(
        found=selection.found,
        items=items,
        level=selection.level,
        hint=hint,
        domains_after=marked.domains_after,
        message=message,
    )
    status = ToolInvocation.Status.DEGRADED if degraded else ToolInvocation.Status.SUCCESS
    return Answer(body, selection.level, hint, degraded, status)
