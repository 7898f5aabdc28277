"""What Prometheus instrumentation costs per request: the figures behind the choice of
``prometheus-client`` (docs/operations.md, "Metrics and traces").

Each variant runs in a process of its own (prometheus_client decides at import whether it keeps
values in memory or in the multiprocess folder), serving a view that does nothing through
Django's test client, N requests a round, the best and median round printed in µs of CPU time
a request (the process's own CPU time, so other work on the machine moves the figures little):

- ``plain``: no instrumentation (the baseline);
- ``agentkb`` / ``agentkb-mp``: what agentkb records a lookup: one counter with its four labels,
  one histogram observation per lookup stage (nine) and one for the whole lookup, with
  prometheus_client in memory / in multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, as under
  gunicorn);
- ``django-prometheus`` / ``django-prometheus-mp``: django-prometheus's two middlewares (request
  and response counters and latency histograms on every request), in memory / multiprocess.
  Skipped when django-prometheus is not importable; to compare, install it anywhere and name the
  folder: ``--extra-path /tmp/djp`` after ``pip install --target /tmp/djp --no-deps django-prometheus``.

    .venv/bin/python bench/metrics_cost.py
    .venv/bin/python bench/metrics_cost.py --requests 2000 --rounds 5

Nothing is asserted: the figures are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VARIANTS = ("plain", "agentkb", "agentkb-mp", "django-prometheus", "django-prometheus-mp")
STAGES = (
    "memory",
    "candidates:l0",
    "candidates:l1",
    "searchable",
    "evidence",
    "selection",
    "content",
    "marking",
    "answer",
)


def _child(variant: str, requests: int, rounds: int) -> dict:
    import django
    from django.conf import settings
    from django.http import HttpResponse
    from django.urls import path

    recorders = []
    if variant.startswith("agentkb"):
        from prometheus_client import Counter, Histogram

        lookups = Counter("bench_lookups", "lookups", ["level", "dedup_reason", "status", "agent"])
        stage = Histogram("bench_stage_seconds", "stage", ["stage"])
        total = Histogram("bench_lookup_seconds", "lookup")

        def record() -> None:
            lookups.labels("PRECISE", "none", "SUCCESS", "7").inc()
            for name in STAGES:
                stage.labels(name).observe(0.001)
            total.observe(0.01)

        recorders.append(record)

    def view(request):
        for record in recorders:
            record()
        return HttpResponse("ok")

    middleware = []
    if variant.startswith("django-prometheus"):
        middleware = [
            "django_prometheus.middleware.PrometheusBeforeMiddleware",
            "django_prometheus.middleware.PrometheusAfterMiddleware",
        ]
    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=middleware,
        INSTALLED_APPS=[],
        DATABASES={},
    )
    sys.modules[__name__].urlpatterns = [path("x", view)]  # type: ignore[attr-defined]
    django.setup()
    from django.test import Client

    client = Client()
    for _ in range(200):  # warm up: first-request imports, URL resolver caches
        client.get("/x")
    per_request = []
    for _ in range(rounds):
        # CPU time of this process, not wall time: the figure stays put while other work shares
        # the cores (the requests never wait on anything but the CPU).
        started = time.process_time()
        for _ in range(requests):
            client.get("/x")
        per_request.append((time.process_time() - started) / requests * 1e6)
    return {"variant": variant, "best_us": min(per_request), "median_us": statistics.median(per_request)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests a round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds a variant (default 5)")
    parser.add_argument("--extra-path", default="", help="a folder where django-prometheus is installed")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.extra_path:
        sys.path.insert(0, args.extra_path)

    if args.child:
        print(json.dumps(_child(args.child, args.requests, args.rounds)))
        return

    results = []
    for variant in VARIANTS:
        env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        with tempfile.TemporaryDirectory(prefix="bench-metrics-") as folder:
            if variant.endswith("-mp"):
                env["PROMETHEUS_MULTIPROC_DIR"] = folder
            command = [sys.executable, __file__, "--child", variant]
            command += ["--requests", str(args.requests), "--rounds", str(args.rounds)]
            if args.extra_path:
                command += ["--extra-path", args.extra_path]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["failed"])[-1]
            print(f"{variant:<22} skipped: {last}")
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))

    baseline = next((r["best_us"] for r in results if r["variant"] == "plain"), None)
    print("CPU time per request through Django's test client")
    print(f"{'variant':<22} {'best µs/req':>12} {'median µs/req':>14} {'added (best)':>13}")
    for result in results:
        added = "" if baseline is None else f"{result['best_us'] - baseline:+.1f}"
        print(f"{result['variant']:<22} {result['best_us']:>12.1f} {result['median_us']:>14.1f} {added:>13}")


if __name__ == "__main__":
    main()
