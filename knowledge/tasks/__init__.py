"""Celery tasks of the knowledge app. Celery's autodiscovery imports this module, so every
task module must be imported here."""

from knowledge.tasks import domains, indexing, maintenance  # noqa: F401
