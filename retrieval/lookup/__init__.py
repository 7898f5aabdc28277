"""The lookup itself (seed 000, FS-1..FS-6): from a clean query to the agent's body and the call
record staff read. ``retrieval.lookup.pipeline.lookup_run`` reads as its list of stages; each
stage is a module here with a typed input and output (``docs/architecture.md`` lists them)."""
