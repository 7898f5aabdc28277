"""Start-up checks of the knowledge settings (``manage.py check``, runserver, migrate): a bad value
is reported with the variable named before indexing or a lookup fails on it."""

from __future__ import annotations

from django.core import checks
from django.core.exceptions import ImproperlyConfigured


@checks.register()
def lexical_engine_setting_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    # Only the value: which engine ``auto`` picks may need Milvus to answer, decided on first use.
    from knowledge.lexical.choice import lexical_engine_setting

    try:
        lexical_engine_setting()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), hint="See .env.example.", id="knowledge.E001")]
    return []
