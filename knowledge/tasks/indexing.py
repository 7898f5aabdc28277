"""Indexing tasks: turn a document into chunks and vectors (the ingestion issue fills this)."""
