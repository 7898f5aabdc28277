from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class RetrievalConfig(AppConfig):
    name = "retrieval"
    verbose_name = _("Retrieval")

    def ready(self) -> None:
        from retrieval import (
            checks,  # noqa: F401 - registers the settings checks
            signals,  # noqa: F401 - the domain-scope guard
        )
