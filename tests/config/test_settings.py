import os

from tests.support.settings_start import django_setup


def _django_setup(env_overrides: dict[str, str]):
    return django_setup(env_overrides, without=("SECRET_KEY", "ALLOWED_HOSTS", "DEBUG"))


def test_production_without_secret_key_stops_with_the_variable_named():
    result = _django_setup({"DEBUG": "false", "ALLOWED_HOSTS": "kb.example.com"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_without_allowed_hosts_stops_with_the_variable_named():
    result = _django_setup({"DEBUG": "false", "SECRET_KEY": "x" * 50})
    assert result.returncode != 0
    assert "ALLOWED_HOSTS must be set" in result.stderr


def test_production_with_both_set_starts():
    result = _django_setup({"DEBUG": "false", "SECRET_KEY": "x" * 50, "ALLOWED_HOSTS": "kb.example.com"})
    assert result.returncode == 0, result.stderr


def test_embedded_default_needs_no_server(settings):
    # In the embedded mode nothing points at a server; in the service mode DATABASE_URL does.
    if not os.environ.get("DATABASE_URL"):
        assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    if not os.environ.get("REDIS_URL"):
        assert settings.CELERY_BROKER_URL == "filesystem://localhost/"
    assert not settings.MILVUS_URI.startswith("http") or os.environ.get("DATABASE_URL")
