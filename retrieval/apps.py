from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class RetrievalConfig(AppConfig):
    name = "retrieval"
    verbose_name = _("Retrieval")

    def ready(self) -> None:
        from observability.calibration import settings_thresholds_reader_register
        from observability.shared_state import sessions_evicted_reader_register
        from retrieval import (
            checks,  # noqa: F401 - registers the settings checks
            signals,  # noqa: F401 - the domain-scope guard
        )
        from retrieval.agents.tracker import sessions_evicted
        from retrieval.lookup.thresholds import settings_thresholds

        # The staff pages draw the thresholds in force; the pair before calibration is ours.
        settings_thresholds_reader_register(settings_thresholds)
        # The dashboard counts the sessions the per-agent cap evicted; the counter is ours.
        sessions_evicted_reader_register(sessions_evicted)
