"""Every setting read from the environment is documented in .env.example and docs/settings.md."""

import re

from tests.conftest import REPO

_READ = re.compile(r'env\.(?:str|bool|int|float|list|db_url)\(\s*"([A-Z0-9_]+)"')


def _settings_read() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "config").rglob("*.py"):
        names |= set(_READ.findall(path.read_text()))
    return names


def test_every_setting_is_in_env_example():
    documented = set(re.findall(r"^([A-Z0-9_]+)=", (REPO / ".env.example").read_text(), re.M))
    assert _settings_read() - documented == set()


def test_every_setting_is_in_the_settings_page():
    readme = (REPO / "docs" / "settings.md").read_text()
    assert {name for name in _settings_read() if f"`{name}`" not in readme} == set()
