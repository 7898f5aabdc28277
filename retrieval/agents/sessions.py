"""An agent's sessions: what a session has retrieved, and forgetting it (the session endpoints).

Session ids are the agent's own: ``conv-42`` of one agent and ``conv-42`` of another are two
sessions (``retrieval.agents.identity.memory_session_key``). A scoped agent sees only its domains.
"""

from __future__ import annotations

from retrieval.agents.identity import Agent
from retrieval.agents.scopes import memory_scoped
from retrieval.agents.tracker import get_tracker
from retrieval.services import session_id_clean


def agent_session_retrievals_get(*, agent: Agent, session_id: str) -> dict[str, list[str]]:
    """domain -> doc keys this agent's session already has, domains in first-retrieved order."""
    memory = get_tracker().snapshot(agent.memory_key(session_id_clean(session_id)))
    return memory_scoped(memory, agent.domains).domains


def agent_session_retrievals_clear(*, agent: Agent, session_id: str) -> None:
    """Forget everything this agent's session has retrieved (seed clearSession)."""
    get_tracker().clear_session(agent.memory_key(session_id_clean(session_id)))
