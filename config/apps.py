from django.apps import AppConfig


class ProjectConfig(AppConfig):
    """The project package as an app, so that its system checks are registered at start-up."""

    name = "config"
    label = "agentkb"
    verbose_name = "agentkb"

    def ready(self) -> None:
        from config import checks  # noqa: F401 - registers the deploy checks
