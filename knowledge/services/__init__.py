"""Services of the knowledge app (writes). One module per concern:

- ``ingestion``: parse, store, chunk and index documents; delete; re-index.
- ``uploads``: batches of files, zips and folders into documents, with the upload limits.
- ``export``: documents back to files with their frontmatter.
- ``locks``: the per-document lock that keeps two indexing runs of one document apart.
- ``domains``: knowledge_domain rows, document counts, when_to_retrieve regeneration.
"""
