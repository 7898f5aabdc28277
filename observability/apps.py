from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ObservabilityConfig(AppConfig):
    name = "observability"
    verbose_name = _("Observability")
