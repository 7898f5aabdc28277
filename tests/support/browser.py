"""Headless Chromium for the staff-page browser tests: one launcher, one wait, one login.

Debian's chromium + chromium-driver (``.ci/run`` installs them with a CJK font). The driver path
is explicit so selenium never tries to download one; each browser gets its own throwaway profile.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

#: the marks every browser test module carries: the ``browser`` marker, and a skip naming what to
#: install where Chromium is missing
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (CHROMIUM and CHROMEDRIVER),
        reason="headless Chromium not installed: apt-get install chromium chromium-driver fonts-wqy-microhei "
        "(.ci/run does)",
    ),
]

ADMIN_USER, ADMIN_PASSWORD = "browser-admin", "browser-pass-123"


@contextmanager
def chromium(*, width: int, height: int, lang: str = "en-US") -> Iterator:
    """A headless Chromium WebDriver with a ``width`` x ``height`` window; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="agentkb-chromium-")
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--window-size={width},{height}",
        f"--lang={lang}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver, condition: str, timeout: float = 30.0):
    """Poll the JavaScript ``condition`` (a function body that returns) until it is truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(condition)
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for: {condition}")


def admin_login(driver, live_server, *, username: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> None:
    from django.urls import reverse

    driver.get(live_server.url + reverse("admin:login"))
    driver.find_element("name", "username").send_keys(username)
    driver.find_element("name", "password").send_keys(password)
    driver.find_element("css selector", "input[type=submit]").click()
    wait_for(driver, "return document.body.classList.contains('dashboard')")
