"""Admin for the knowledge app, one module per model family."""

from knowledge.admin import documents, domains  # noqa: F401  (registers the ModelAdmins)
