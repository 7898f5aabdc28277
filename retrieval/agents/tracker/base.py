"""The action memory's interface (seed 000 section 4, FS-3): session -> domain -> doc keys."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SessionRetrievals:
    """What one session already has: domains in first-retrieved order, each with its doc keys."""

    domains: dict[str, list[str]] = field(default_factory=dict)

    @property
    def domain_list(self) -> list[str]:
        return list(self.domains)

    @property
    def doc_keys(self) -> set[str]:
        return {doc for docs in self.domains.values() for doc in docs}


class RetrievedDocTracker(ABC):
    """Two-level action memory. ``mark_many`` and ``snapshot`` are the primitives a store
    implements (one round trip each); the seed's single-item API is built on them."""

    @abstractmethod
    def mark_many(self, session_id: str, items: Iterable[tuple[str, str]]) -> list[str]:
        """Record (domain, doc_key) pairs at once; return the session's domains afterwards, in
        first-retrieved order."""

    @abstractmethod
    def snapshot(self, session_id: str) -> SessionRetrievals:
        """Everything the session holds, read at once (and the session kept alive)."""

    @abstractmethod
    def clear_session(self, session_id: str) -> None:
        """Forget the session."""

    # --- the seed's API (markRetrieved, isDocRetrieved, ...) ---------------------------------
    def mark_retrieved(self, session_id: str, domain: str, doc_key: str) -> None:
        self.mark_many(session_id, [(domain, doc_key)])

    def is_doc_retrieved(self, session_id: str, doc_key: str) -> bool:
        return doc_key in self.snapshot(session_id).doc_keys

    def is_domain_retrieved(self, session_id: str, domain: str) -> bool:
        return domain in self.snapshot(session_id).domains

    def get_retrieved_domains(self, session_id: str) -> list[str]:
        return self.snapshot(session_id).domain_list

    def is_already_retrieved(self, session_id: str, doc_key: str) -> bool:
        """The ISS-001 name (seed 004 Part A); same meaning as ``is_doc_retrieved``."""
        return self.is_doc_retrieved(session_id, doc_key)
