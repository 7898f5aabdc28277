"""Dashboard queries at 1,000,000 tool_invocation rows on MariaDB.

Loads N synthetic lookup records (bulk multi-row INSERTs) into a database of its own (default
``agentkb_bench``, never ``test``), then times every dashboard selector next to the bare SQL
GROUP BY of the same column (seed 000 section 8), in the same run, and shows which index MariaDB
chose for each. Rows are kept between runs (reloaded only when the count differs or --reload).

    .venv/bin/python bench/dashboard.py                      # 1,000,000 rows, agentkb_bench
    .venv/bin/python bench/dashboard.py --rows 200000 --reload
    .venv/bin/python bench/dashboard.py --database-url mysql://root@127.0.0.1:3306/agentkb_bench

The synthetic month: 30 days, ~95% lookup_knowledge (levels ~ 10% PRECISE, 35% HIGHLY_RELEVANT,
30% REFERENCE, 10% DEDUPED, 15% not found), sessions of consecutive calls (Pareto lengths: mostly
one to three, some 20+), 8 domains, 500 distinct queries.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LEVELS = [("PRECISE", 0.10), ("HIGHLY_RELEVANT", 0.35), ("REFERENCE", 0.30), ("DEDUPED", 0.10), (None, 0.15)]
DOMAINS = ["infrastructure", "api", "database", "security", "frontend", "billing", "troubleshooting", "运维"]
QUERIES = [f"数据库连接池配置 {i}" if i % 2 else f"how to configure thing {i}" for i in range(500)]
HINT = "当前结果已高度相关，继续检索不太可能找到更精准的文档"
END = datetime(2026, 3, 31, tzinfo=UTC)
SPAN = timedelta(days=30)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--database-url", default="mysql://root@127.0.0.1:3306/agentkb_bench")
    parser.add_argument("--reload", action="store_true", help="delete and reload the rows")
    parser.add_argument("--repeat", type=int, default=3, help="runs per query (the median is shown)")
    parser.add_argument("--batch", type=int, default=5000, help="rows per INSERT")
    return parser.parse_args()


def _setup(database_url: str) -> None:
    parsed = urlparse(database_url)
    name = parsed.path.lstrip("/")
    if parsed.scheme != "mysql":
        sys.exit("--database-url: a mysql:// URL (MariaDB) is required")
    if not name or name == "test" or name.startswith("test_"):
        sys.exit(f"--database-url: refusing database {name!r}: the benchmark needs a database of its own")
    import MySQLdb

    server = MySQLdb.connect(
        host=parsed.hostname or "127.0.0.1",
        port=parsed.port or 3306,
        user=parsed.username or "root",
        password=parsed.password or "",
    )
    server.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
    server.close()
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # Nothing queued by a page view may land in a broker folder a real worker reads later.
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "true"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


AGENTS = 5  # agent users; a session is one agent's (1 in 10 sessions has no agent)


def _row(rng: random.Random, i: int, n: int, session: str, agent: int | None = None) -> tuple:
    created = END - SPAN + SPAN * (i / n) + timedelta(seconds=rng.random())
    tool = "lookup_knowledge" if rng.random() < 0.95 else "list_domains"
    r, level = rng.random(), None
    for candidate, share in LEVELS:
        if r < share:
            level = candidate
            break
        r -= share
    similarity = {
        "PRECISE": rng.uniform(0.85, 1.0),
        "HIGHLY_RELEVANT": rng.uniform(0.75, 0.95),
        "REFERENCE": rng.uniform(0.5, 0.75),
        "DEDUPED": rng.uniform(0.5, 0.95),
        None: rng.uniform(0.0, 0.5),
    }[level]
    if rng.random() < 0.03:
        similarity = None  # L1 returned nothing (e.g. degraded)
    status = "ERROR" if rng.random() < 0.005 else ("DEGRADED" if similarity is None else "SUCCESS")
    if status == "ERROR":
        level = None
    dedup = None
    if level == "DEDUPED":
        dedup = "doc_retrieved" if rng.random() < 0.7 else "domain_retrieved"
    domains = [] if level in (None, "DEDUPED") else rng.sample(DOMAINS, rng.randint(1, 3))
    query = rng.choice(QUERIES)
    details = {
        "query": query,
        "l0_match_count": 1 if level == "PRECISE" else 0,
        "l1_top_score": None if similarity is None else round(2 * (1 - similarity), 4),
        "l1_top_similarity": None if similarity is None else round(similarity, 4),
        "relevance_level": level,
        "completeness_hint": HINT if level else "",
        "dedup_reason": dedup,
        "returned_domains": domains,
        "timings": {"total_ms": 0},
    }
    duration = int(rng.lognormvariate(3.5, 0.6))
    return (
        session,
        tool,
        json.dumps({"query": query, "session_id": session}, ensure_ascii=False),
        "",
        status,
        "",
        duration,
        json.dumps(details, ensure_ascii=False),
        created.strftime("%Y-%m-%d %H:%M:%S.%f"),
        level,
        dedup,
        agent,
    )


def _load(rows: int, batch: int, reload: bool) -> None:
    from django.db import connection

    from observability.models import ToolInvocation

    have = ToolInvocation.objects.count()
    if have == rows and not reload:
        print(f"rows: {have:,} already loaded (use --reload to load again)")
        return
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM tool_invocation_feedback")
        # TRUNCATE refuses a table other tables reference, even when they are empty.
        cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
        cursor.execute("TRUNCATE TABLE tool_invocation")
        cursor.execute("SET FOREIGN_KEY_CHECKS = 1")
    rng = random.Random(20260331)
    from django.contrib.auth import get_user_model

    agent_ids = [
        get_user_model().objects.get_or_create(username=f"bench-agent-{i}")[0].pk for i in range(AGENTS)
    ]
    agent = None
    sql = (
        "INSERT INTO tool_invocation (session_id, tool_name, request, result_summary, status, error, "
        "duration_ms, retrieval_details, created_at, relevance_level, dedup_reason, agent_id) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    started = time.perf_counter()
    sessions = left = 0
    connection.ensure_connection()
    raw = connection.connection
    cursor = raw.cursor()
    for offset in range(0, rows, batch):
        values = []
        for i in range(offset, min(rows, offset + batch)):
            if left == 0:
                # A session is a conversation: a run of consecutive calls, mostly a few, some 20+.
                sessions += 1
                left = min(60, int(rng.paretovariate(1.1)))
                agent = None if rng.random() < 0.1 else rng.choice(agent_ids)
            values.append(_row(rng, i, rows, f"session-{sessions}", agent))
            left -= 1
        cursor.executemany(sql, values)  # mysqlclient turns this into one multi-row INSERT
        raw.commit()
        if (offset // batch) % 40 == 0:
            print(
                f"  loaded {offset + len(values):,} rows ({time.perf_counter() - started:.0f} s)", flush=True
            )
    cursor.close()
    with connection.cursor() as c:
        c.execute("ANALYZE TABLE tool_invocation")
        c.fetchall()
    print(f"rows: loaded {rows:,} in {time.perf_counter() - started:.1f} s")


def _median_ms(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), result


def _raw(sql: str, params: list | None = None):
    from django.db import connection

    def run():
        with connection.cursor() as cursor:
            cursor.execute(sql, params or [])
            return cursor.fetchall()

    return run


def _index_used(fn) -> str:
    """The key MariaDB's EXPLAIN names for the first query ``fn`` runs (derived tables too)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        fn()
    if not captured.captured_queries:
        return "-"
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + captured.captured_queries[0]["sql"])
        columns = [c[0] for c in cursor.description]
        keys = []
        for row in cursor.fetchall():
            info = dict(zip(columns, row, strict=True))
            extra = info.get("Extra") or ""
            index_only = "Using index" in [part.strip() for part in extra.split(";")]
            keys.append(f"{info.get('key') or 'NONE'}{' (index only)' if index_only else ''}")
    return ", ".join(dict.fromkeys(keys))


def main() -> None:
    args = _parse_args()
    _setup(args.database_url)
    _load(args.rows, args.batch, args.reload)

    from django.db import connection

    from observability import selectors
    from observability.selectors import InvocationFilter, invocations_filtered

    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        version = cursor.fetchone()[0]
        cursor.execute("SELECT COUNT(*) FROM tool_invocation")
        total = cursor.fetchone()[0]
    print(f"MariaDB {version}; tool_invocation rows: {total:,}; median of {args.repeat} runs\n")

    month = InvocationFilter(start=END - SPAN, end=END)
    day = InvocationFilter(start=END - timedelta(days=1), end=END)
    month_domain = InvocationFilter(start=END - SPAN, end=END, domain="api")
    tool = "WHERE tool_name = 'lookup_knowledge'"
    bare = {
        "relevance_distribution": f"SELECT relevance_level, COUNT(*) FROM tool_invocation {tool} GROUP BY relevance_level",
        "dedup_distribution": f"SELECT dedup_reason, COUNT(*) FROM tool_invocation {tool} GROUP BY dedup_reason",
        "similarity_histogram": (
            "SELECT JSON_EXTRACT(retrieval_details, '$.l1_top_similarity') AS similarity, COUNT(*) AS cnt "
            f"FROM tool_invocation {tool} AND retrieval_details IS NOT NULL GROUP BY similarity ORDER BY similarity"
        ),
        "relevance_over_time": (
            "SELECT DATE(created_at), relevance_level, COUNT(*) FROM tool_invocation "
            f"{tool} GROUP BY DATE(created_at), relevance_level"
        ),
        "dedup_over_time": (
            "SELECT DATE(created_at), dedup_reason, COUNT(*) FROM tool_invocation "
            f"{tool} GROUP BY DATE(created_at), dedup_reason"
        ),
        "lookups_per_session": (
            "SELECT n, COUNT(*) FROM (SELECT session_id, COUNT(*) n FROM tool_invocation "
            f"{tool} GROUP BY session_id) t GROUP BY n"
        ),
        "latency_percentiles": f"SELECT duration_ms, COUNT(*) FROM tool_invocation {tool} GROUP BY duration_ms",
        "status_rates": f"SELECT status, COUNT(*) FROM tool_invocation {tool} GROUP BY status",
        "not_found_queries": (
            "SELECT JSON_UNQUOTE(JSON_EXTRACT(request, '$.query')) q, COUNT(*) n FROM tool_invocation "
            f"{tool} AND relevance_level IS NULL AND status <> 'ERROR' GROUP BY q ORDER BY n DESC LIMIT 10"
        ),
    }

    def calls(filters):
        def qs():
            return invocations_filtered(filters=filters)

        return {
            "relevance_distribution": lambda: selectors.relevance_distribution(qs=qs()),
            "dedup_distribution": lambda: selectors.dedup_distribution(qs=qs()),
            "similarity_histogram": lambda: selectors.similarity_histogram(qs=qs()),
            "relevance_over_time": lambda: selectors.distribution_over_time(
                qs=qs(), filters=filters, field="relevance_level"
            ),
            "dedup_over_time": lambda: selectors.distribution_over_time(
                qs=qs(), filters=filters, field="dedup_reason"
            ),
            "lookups_per_session": lambda: selectors.lookups_per_session(qs=qs()),
            "latency_percentiles": lambda: selectors.latency_percentiles(qs=qs()),
            "status_rates": lambda: selectors.status_rates(qs=qs()),
            "not_found_queries": lambda: selectors.not_found_queries(qs=qs()),
        }

    header = f"{'query':<24} {'30 days':>10} {'30d+domain':>11} {'last day':>10} {'bare SQL':>10}  index (30 days) / bare SQL"
    print(header)
    print("-" * len(header))
    totals = {"month": 0.0, "domain": 0.0, "day": 0.0, "bare": 0.0}
    month_calls, domain_calls, day_calls = calls(month), calls(month_domain), calls(day)
    for name in month_calls:
        m, _ = _median_ms(month_calls[name], args.repeat)
        d, _ = _median_ms(domain_calls[name], args.repeat)
        y, _ = _median_ms(day_calls[name], args.repeat)
        b, _ = _median_ms(_raw(bare[name]), args.repeat)
        totals["month"] += m
        totals["domain"] += d
        totals["day"] += y
        totals["bare"] += b
        print(
            f"{name:<24} {m:>8.1f}ms {d:>9.1f}ms {y:>8.1f}ms {b:>8.1f}ms  "
            f"{_index_used(month_calls[name])} / {_index_used(_raw(bare[name]))}"
        )
    print("-" * len(header))
    print(
        f"{'sum':<24} {totals['month']:>8.1f}ms {totals['domain']:>9.1f}ms {totals['day']:>8.1f}ms "
        f"{totals['bare']:>8.1f}ms"
    )

    # The page: every chart's numbers at once (four GROUP BYs), raw vs daily rollups.
    from observability.models import InvocationDailyRollup, InvocationRollupDay

    print("\ndashboard page (selectors.dashboard_data: every chart of the page)")
    week = InvocationFilter(start=END - timedelta(days=7), end=END)
    from django.contrib.auth import get_user_model

    month_agent = replace(month, agent=get_user_model().objects.get(username="bench-agent-0").pk)
    now = END + timedelta(hours=6)  # the synthetic month ended six hours ago
    from unittest import mock

    from observability import rollups

    with mock.patch("django.utils.timezone.now", return_value=now):
        InvocationDailyRollup.objects.all().delete()
        InvocationRollupDay.objects.all().delete()
        # A first view with no rollups at all: reads every day raw (and would queue their build
        # for the worker: not here, to time the view alone).
        with mock.patch.object(rollups, "rollups_queue"):
            started = time.perf_counter()
            selectors.dashboard_data(filters=month)
            first_view = (time.perf_counter() - started) * 1000
        # What the hourly task / rollup_invocations does for the other days.
        missing = [d for d in rollups.rollup_plan(start=month.start, end=month.end, bucket="day")[1]]
        started = time.perf_counter()
        rollups.rollups_ensure(missing)
        build_all = (time.perf_counter() - started) * 1000
        days = InvocationRollupDay.objects.count()
        rollup_rows = InvocationDailyRollup.objects.count()
        rows_page = [
            (
                "30 days, counted from tool_invocation",
                lambda: selectors.dashboard_data(filters=month, use_rollups=False),
            ),
            ("30 days, daily rollups", lambda: selectors.dashboard_data(filters=month)),
            ("30 days + domain, daily rollups", lambda: selectors.dashboard_data(filters=month_domain)),
            ("30 days + one agent, daily rollups", lambda: selectors.dashboard_data(filters=month_agent)),
            ("7 days, daily rollups", lambda: selectors.dashboard_data(filters=week)),
            ("last day (per hour, tool_invocation)", lambda: selectors.dashboard_data(filters=day)),
        ]
        print(f"  {'first 30-day view, no rollups yet (builds 2 days)':<52} {first_view:>9.1f} ms")
        print(
            f"  {'rolling up the other ' + str(days - 2) + ' days (worker / command)':<52} {build_all:>9.1f} ms"
        )
        for label, fn in rows_page:
            ms, _ = _median_ms(fn, args.repeat)
            print(f"  {label:<52} {ms:>9.1f} ms")
    print(f"  rollup rows for {days} days: {rollup_rows:,} ({rollup_rows / max(days, 1):.0f} per day)")
    raw = selectors.dashboard_data(filters=month_domain, use_rollups=False)
    rolled = _with_now(now, lambda: selectors.dashboard_data(filters=month_domain))
    differ = [key for key in raw if raw[key] != rolled[key]]
    print(f"  rollups vs counting raw rows (30 days + domain): charts that differ: {differ or 'none'}")
    if "sessions" in differ:
        # Sessions are counted per day in rollups: one that spans midnight counts on both days.
        print(f"    sessions raw: {_session_line(raw['sessions'])}")
        print(f"    sessions rollups: {_session_line(rolled['sessions'])}")

    _pages(args.repeat)


def _session_line(s: dict) -> str:
    return f"{s['sessions']:,} sessions, mean {s['mean']}, p50 {s['p50']}, p95 {s['p95']}, max {s['max']}"


def _with_now(now, fn):
    from unittest import mock

    with mock.patch("django.utils.timezone.now", return_value=now):
        return fn()


def _pages(repeat: int) -> None:
    """Whole admin pages through Django's test client, as staff see them."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    changelist = reverse("admin:observability_toolinvocation_changelist")
    dashboard = reverse("admin:observability_retrievaldashboard_changelist")
    start = (END - SPAN).isoformat()
    end = END.isoformat()
    pages = [
        (
            "dashboard, custom range = the 30 days",
            dashboard + f"?range=custom&start={start[:16]}&end={end[:16]}",
        ),
        ("dashboard, last 30 days from now", dashboard + "?range=30d"),
        ("invocation list, unfiltered (charts over all rows)", changelist),
        ("invocation list, level=REFERENCE", changelist + "?level=REFERENCE"),
        (
            "invocation list, one day (from/to filter)",
            changelist + "?from=2026-03-20T00:00:00%2B00:00&to=2026-03-21T00:00:00%2B00:00",
        ),
    ]
    print("\nadmin pages (HTTP GET through Django, median)")
    for label, url in pages:

        def get(url=url):
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        ms, _ = _median_ms(get, repeat)
        print(f"  {label:<52} {ms:>9.1f} ms")


if __name__ == "__main__":
    main()
