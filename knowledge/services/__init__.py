"""Services of the knowledge app (writes). One module per concern:

- ``ingestion``: parse, store, chunk and index documents; delete; re-index.
- ``domains``: knowledge_domain rows, document counts, when_to_retrieve regeneration.
"""
