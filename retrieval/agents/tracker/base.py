"""The action memory's interface (seed 000 section 4, FS-3): session -> domain -> doc keys, and
for each document what of it was sent: the whole document or some of its chunks.

A store keeps marks as opaque strings under a domain: a doc key alone (the seeds'
``markRetrieved``: the whole document) or ``doc key + CHUNK_SEP + chunk index`` (one chunk of it
was sent). ``SessionRetrievals.from_marks`` reads them back."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Between a doc key and a chunk index in a chunk mark (doc keys are paths: never this character).
CHUNK_SEP = "\x1e"


def chunk_mark(doc_key: str, chunk_index: int) -> str:
    """The mark of one chunk of a document sent to the session."""
    return f"{doc_key}{CHUNK_SEP}{chunk_index}"


@dataclass(frozen=True)
class SessionRetrievals:
    """What one session already has: domains in first-retrieved order, each with its doc keys;
    ``chunks_sent``: for documents of which only some chunks were sent, their indexes (a document
    absent from it, but in ``domains``, was sent whole)."""

    domains: dict[str, list[str]] = field(default_factory=dict)
    chunks_sent: dict[str, frozenset[int]] = field(default_factory=dict)

    @classmethod
    def from_marks(cls, marks: dict[str, list[str]]) -> SessionRetrievals:
        """The session from a store's marks, domain -> marks in first-marked order."""
        domains: dict[str, list[str]] = {}
        chunks: dict[str, set[int]] = {}
        whole: set[str] = set()
        for domain, members in marks.items():
            docs = domains.setdefault(domain, [])
            for member in members:
                doc_key, sep, index = member.partition(CHUNK_SEP)
                if doc_key not in docs:
                    docs.append(doc_key)
                if sep and index.isdigit():
                    chunks.setdefault(doc_key, set()).add(int(index))
                else:
                    whole.add(doc_key)
        return cls(domains, {doc: frozenset(ix) for doc, ix in chunks.items() if doc not in whole})

    def holds(self, doc_key: str, chunk_index: int | None) -> bool:
        """Whether the session already has this part of the document: all of it when it was sent
        whole; the chunk when only chunks were sent (a part we cannot name counts as held, the
        seeds' document-level rule)."""
        if doc_key not in self.doc_keys:
            return False
        sent = self.chunks_sent.get(doc_key)
        return sent is None or chunk_index is None or chunk_index in sent

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

    def sessions_evicted(self) -> int:
        """Sessions this store dropped because their agent held more than
        RETRIEVAL_MAX_SESSIONS_PER_AGENT (least recently used first)."""
        return 0

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


# --- keys: whose session it is ----------------------------------------------------------------
def memory_session_key(*, agent_id: int | None, agent: str, session_id: str) -> str:
    """The action-memory key of ``session_id`` for one agent.

    ``a<user id>:`` for token agents, ``n<len>:<name>:`` for named local callers (the length keeps
    "x:y" + "z" apart from "x" + "y:z"). Every key is prefixed, so no session id a client chooses
    can name another agent's session.
    """
    if agent_id is not None:
        return f"a{agent_id}:{session_id}"
    return f"n{len(agent)}:{agent}:{session_id}"


def memory_key_owner(key: str) -> str:
    """The agent part of an action-memory key (``memory_session_key``): ``a<user id>`` or
    ``n<len>:<name>``; "" for a key of neither form (a test's, or one written before keys were
    per agent). What the action memory caps sessions by."""
    if key.startswith("a"):
        head, sep, _ = key.partition(":")
        return head if sep and head[1:].isdigit() else ""
    if key.startswith("n"):
        length, sep, rest = key[1:].partition(":")
        if sep and length.isdigit() and len(rest) > int(length) and rest[int(length)] == ":":
            return f"n{length}:{rest[: int(length)]}"
    return ""
