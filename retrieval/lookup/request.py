"""What every stage of a lookup knows: the clean call and the settings in force for it, read once
at its start so a change of settings mid-call cannot split one lookup between two rules."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.lookup.level_model import LevelModel
from retrieval.lookup.metadata_conditions import MetadataCondition
from retrieval.lookup.thresholds import Thresholds


@dataclass(frozen=True)
class LookupRequest:
    query: str
    #: the action-memory key, already scoped by agent (``retrieval.agents.identity``)
    session_id: str
    top_k: int
    #: hit testing: mark nothing, record nothing
    dry_run: bool
    #: the agent's allowed domains; None: every domain
    domains: frozenset[str] | None
    #: the agent-facing language, "zh" or "en"
    language: str
    thresholds: Thresholds
    #: RETRIEVAL_DOMAIN_DEDUP: "off", "soft" or "hard"
    domain_dedup: str
    max_supplement: int
    content_max_chars: int
    #: RETRIEVAL_LEVELS=model and the embedding model has a level profile; None: the seeds' rule
    level_model: LevelModel | None = None
    #: the call's own metadata condition (Dify's language); None: the call set none
    metadata_condition: MetadataCondition | None = None
