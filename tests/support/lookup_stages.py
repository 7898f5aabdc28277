"""The lookup's stages in order, as ``retrieval.lookup.pipeline.lookup_run`` starts them: the one
list the architecture test holds the code to and the tracing and metrics tests expect."""

LOOKUP_STAGES = (
    "filtering",
    "candidates:l1",
    "memory",
    "candidates:l0",
    "searchable",
    "evidence",
    "selection",
    "content",
    "marking",
    "answer",
)

#: L1 runs on a thread of its own while these read the memory and L0: their spans overlap, so
#: their start order is not fixed
OVERLAPPING = ("candidates:l1", "memory", "candidates:l0")
