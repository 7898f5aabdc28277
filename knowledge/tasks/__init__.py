"""Celery tasks of the knowledge app. Celery's autodiscovery imports this module, so every
task module must be imported here.

Tasks are thin and call services; services queue tasks on commit by their registered names,
never importing this package (the convention is written out in ``knowledge.services``)."""

from knowledge.tasks import domains, indexing, maintenance  # noqa: F401
