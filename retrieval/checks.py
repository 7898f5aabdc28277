"""Start-up checks of the retrieval settings (``manage.py check``, runserver, migrate): a bad value
is reported with the variable named before any lookup fails on it."""

from __future__ import annotations

from django.core import checks
from django.core.exceptions import ImproperlyConfigured


@checks.register()
def retrieval_settings_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    from retrieval.agents.tracker import tracker_backend
    from retrieval.lookup.pipeline import domain_dedup_mode
    from retrieval.lookup.thresholds import profile_warning, settings_thresholds

    errors = []
    for check_id, read in (
        ("retrieval.E001", settings_thresholds),
        ("retrieval.E002", domain_dedup_mode),
        ("retrieval.E003", tracker_backend),
    ):
        try:
            read()
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(str(exc), hint="See .env.example.", id=check_id))
    if not errors and (warning := profile_warning()):
        errors.append(checks.Warning(warning, hint="See docs/lookup.md.", id="retrieval.W001"))
    return errors
