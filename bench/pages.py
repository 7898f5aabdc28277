"""First visit of the retrieval dashboard, served as in production, in headless Chromium.

Builds a throwaway embedded deployment (SQLite and STATIC_ROOT in a temporary folder, DEBUG off),
seeds a day of mixed traffic from three agents, and serves it with uvicorn as the Procfile does,
twice in one run (columns: ``server`` the document's time to first byte, ``response`` its last byte,
``plotly`` when plotly.js has run and the charts start, ``DOMready``, ``load``, ``drawn`` when
the last chart is drawn; all in ms from the start of navigation):

- ``finders``: nothing collected; WhiteNoise serves plotly.js from the plotly package
  uncompressed and uncached (what the browser test's server does);
- ``collected``: after ``collectstatic``: hashed names, gzip, a one-year immutable cache.

For each it logs in once, then times ``--visits`` dashboard visits with the browser cache cleared
before each (a first visit: nothing cached but the login page's own files) and one visit after
(cache warm), and prints the median of: the document's response, DOMContentLoaded, the load
event, and all charts drawn (``data-drawn`` on every chart), with the bytes plotly.js took on
the wire. No target is asserted: the figures are for docs/observability.md.

    .venv/bin/python bench/pages.py              # 5 cold visits per mode
    .venv/bin/python bench/pages.py --visits 9 --calls 5000
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
USER, PASSWORD = "bench-admin", "bench-pass-123"
DASHBOARD = "/admin/observability/retrievaldashboard/?range=24h"
TIMINGS_JS = """
const nav = performance.getEntriesByType('navigation')[0];
const plotly = performance.getEntriesByType('resource').find(r => r.name.includes('plotly'));
return {
  server: nav.responseStart - nav.requestStart,
  response: nav.responseEnd - nav.startTime,
  plotly_run: window.okbChartsStartAt === undefined ? null : window.okbChartsStartAt,
  dom: nav.domContentLoadedEventEnd - nav.startTime,
  load: nav.loadEventEnd - nav.startTime,
  drawn: window.okbChartsDrawnAt === undefined ? null : window.okbChartsDrawnAt,
  plotly_wire: plotly ? plotly.transferSize : null,
  plotly_body: plotly ? plotly.decodedBodySize : null,
  plotly_ms: plotly ? plotly.responseEnd - plotly.startTime : null,
  charts: document.querySelectorAll('[data-figure]').length,
};
"""


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--visits", type=int, default=5, help="cold visits per mode (the median is shown)")
    parser.add_argument("--calls", type=int, default=3000, help="invocations seeded over the last day")
    return parser.parse_args()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _environment(folder: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "false",
        "SECRET_KEY": "bench-pages-" + "k" * 40,
        "ALLOWED_HOSTS": "localhost,127.0.0.1",
        "SECURE_SSL_REDIRECT": "false",
        "SECURE_HSTS_SECONDS": "0",
        "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}",
        "STATIC_ROOT": str(folder / "static"),
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(REPO),
    }


SEED = """
import random
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from observability.models import ToolInvocation

User = get_user_model()
User.objects.create_superuser({user!r}, "bench@example.com", {password!r})
agents = [User.objects.create(username=f"bench-agent-{{i}}") for i in range(3)] + [None]
levels = ["PRECISE", "HIGHLY_RELEVANT", "REFERENCE", "DEDUPED", None]
rng = random.Random(7)
now = timezone.now()
rows = []
for i in range({calls}):
    level = rng.choices(levels, weights=[10, 35, 30, 10, 15])[0]
    similarity = round(rng.uniform(0.2, 1.0), 3)
    domains = [rng.choice(["infrastructure", "api", "database"])]
    rows.append(ToolInvocation(
        tool_name="lookup_knowledge",
        session_id=f"s-{{i // 3}}",
        agent=agents[i % 4],
        request={{"query": f"查询 {{i % 200}}"}},
        relevance_level=level,
        dedup_reason="doc_retrieved" if level == "DEDUPED" else None,
        duration_ms=int(rng.lognormvariate(3, 0.6)),
        created_at=now - timedelta(seconds=rng.uniform(60, 86000)),
        retrieval_details={{"l1_top_similarity": similarity, "returned_domains": domains if level else []}},
    ))
ToolInvocation.objects.bulk_create(rows, batch_size=1000)
"""


def _manage(env: dict[str, str], *args: str, stdin: str | None = None) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "manage.py"), *args],
        env=env,
        check=True,
        input=stdin,
        text=True,
        stdout=subprocess.DEVNULL,
    )


def _serve(env: dict[str, str], port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=2)
            return server
        except OSError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("uvicorn did not answer within 60 s")


def _browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--no-first-run",
        "--window-size=1440,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)


def _wait(driver, script: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for: {script}")


def _visit(driver, url: str) -> dict:
    driver.get(url)
    _wait(driver, "return window.okbChartsDrawnAt !== undefined && document.readyState === 'complete'")
    _wait(driver, "return performance.getEntriesByType('navigation')[0].loadEventEnd > 0")
    return driver.execute_script(TIMINGS_JS)


def _headers(url: str) -> str:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
        return (
            f"{len(body) / 1e6:.2f} MB on the wire, Content-Encoding {response.headers.get('Content-Encoding') or '-'}, "
            f"Cache-Control {response.headers.get('Cache-Control') or '-'}"
        )


def _measure(env: dict[str, str], mode: str, visits: int, folder: Path) -> None:
    port = _free_port()
    base = f"http://localhost:{port}"
    server = _serve(env, port)
    profile = tempfile.mkdtemp(prefix="agentkb-bench-chromium-", dir=folder)
    driver = _browser(profile)
    try:
        driver.get(base + "/admin/login/")
        driver.find_element("name", "username").send_keys(USER)
        driver.find_element("name", "password").send_keys(PASSWORD)
        driver.find_element("css selector", "input[type=submit]").click()
        _wait(driver, "return document.body.classList.contains('dashboard')")
        _visit(driver, base + DASHBOARD)  # the server's own first request of each file: not timed
        cold = []
        for _ in range(visits):
            driver.execute_cdp_cmd("Network.clearBrowserCache", {})
            cold.append(_visit(driver, base + DASHBOARD))
        warm = _visit(driver, base + DASHBOARD)
        plotly_url = driver.execute_script(
            "return performance.getEntriesByType('resource').find(r => r.name.includes('plotly')).name"
        )
        served = _headers(plotly_url)
    finally:
        driver.quit()
        server.terminate()
        server.wait(timeout=30)

    def median(key: str, rows: list[dict]) -> str:
        values = [r[key] for r in rows if r[key] is not None]
        return f"{statistics.median(values):7.0f}" if values else "      -"

    print(f"\n{mode}: plotly.js {plotly_url.split('/')[-1]}: {served}")
    print(
        f"  {'visit':<28}{'server':>9}{'response':>9}{'plotly':>9}{'DOMready':>9}{'load':>9}{'drawn':>9}"
        "  plotly wire / body"
    )
    for name, rows in ((f"first (cache cleared) x{visits}", cold), ("warm (cached)", [warm])):
        sample = rows[-1]
        wire = f"{(sample['plotly_wire'] or 0) / 1e6:.2f} / {(sample['plotly_body'] or 0) / 1e6:.2f} MB"
        print(
            f"  {name:<28}{median('server', rows)}{median('response', rows)}{median('plotly_run', rows)}"
            f"{median('dom', rows)}{median('load', rows)}"
            f"{median('drawn', rows)}  {wire}   (ms, median; {sample['charts']} charts)"
        )
    print(f"  first visits, all charts drawn (ms): {sorted(round(r['drawn']) for r in cold)}")


def main() -> None:
    args = _parse_args()
    if not (shutil.which("chromium") or shutil.which("chromium-browser")) or not shutil.which("chromedriver"):
        raise SystemExit("needs chromium and chromedriver (apt-get install chromium chromium-driver)")
    folder = Path(tempfile.mkdtemp(prefix="agentkb-bench-pages-"))
    try:
        env = _environment(folder)
        _manage(env, "migrate", "--noinput")
        _manage(env, "shell", stdin=SEED.format(user=USER, password=PASSWORD, calls=args.calls))
        print(f"seeded {args.calls} calls over the last day, 3 agents and calls without one")
        _measure(env, "finders (nothing collected, as the test server)", args.visits, folder)
        _manage(env, "collectstatic", "--noinput")
        _measure(env, "collected (collectstatic: hashed, gzip, immutable cache)", args.visits, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
