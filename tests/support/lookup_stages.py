"""The lookup's stages in order, as ``retrieval.lookup.pipeline.lookup_run`` runs them: the one
list the architecture test holds the code to and the tracing and metrics tests expect."""

LOOKUP_STAGES = (
    "memory",
    "filtering",
    "candidates:l0",
    "candidates:l1",
    "searchable",
    "evidence",
    "selection",
    "content",
    "marking",
    "answer",
)
