"""What authenticating a call and spending its budget cost, per request, on MariaDB + Redis.

In one process, on a throw-away MariaDB database (dropped afterwards) and a Redis database
number (only this run's keys are written; they expire within a minute), median and p95 of:

- the key lookup: DRF's plain-text ``key = %s`` query (before) beside ``token_lookup`` (HMAC-SHA256
  digest, then ``digest IN (...)``: now) and, for the record, a slow hash (PBKDF2-SHA256 at
  Django's password iterations) that a lookup-by-prefix design would pay on every request;
- the budget: DRF's ``SimpleRateThrottle`` on the Redis cache (read the list, append, write it
  back: two round trips and a race) beside ``agent_budget_spend`` (one Lua script: now) and the
  in-process window of the embedded default;
- the whole REST authentication + throttle of one request (``AgentTokenAuthentication`` then
  ``AgentThrottle``), as a view runs them, and of a request by an agent past its budget (refused
  again from the process's memory of refused keys, before the database).

    .venv/bin/python bench/auth.py                   # 2,000 rounds each
    .venv/bin/python bench/auth.py --rounds 500 --redis-db 13

Needs MariaDB on 127.0.0.1:3306 (root, no password) and Redis on 127.0.0.1:6379, as the
service-backed test run does. Nothing is asserted: the figures are printed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _mysql(sql: str) -> None:
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="root", port=3306)
    try:
        conn.cursor().execute(sql)
    finally:
        conn.close()


def _timed(fn, rounds: int) -> tuple[float, float]:
    fn()  # warm: connections, script load
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--redis-db", type=int, default=13)
    args = parser.parse_args()

    db_name = f"agentkb_auth_{uuid.uuid4().hex[:8]}"
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"mysql://root@127.0.0.1:3306/{db_name}",
            "REDIS_URL": f"redis://127.0.0.1:6379/{args.redis_db}",
            "AGENTKB_VAR_DIR": tempfile.mkdtemp(prefix="agentkb-auth-"),
            "API_THROTTLE_TOOL": "600/min",  # the default; the budget rows stay under it
            # A burst window checked on every call (as by default) but never reached: the rows
            # time calls allowed, the window filling as an agent at its limit fills it.
            "API_THROTTLE_TOOL_BURST": "600/s",
            "LOG_LEVEL": "WARNING",
        }
    )
    _mysql(f"CREATE DATABASE `{db_name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        rows = _measure(args.rounds)
    finally:
        _mysql(f"DROP DATABASE IF EXISTS `{db_name}`")

    print(f"\nauth + budget cost per request (MariaDB + Redis, {args.rounds} rounds; microseconds)")
    print(f"  {'step':62} {'p50':>8} {'p95':>8}")
    for label, (p50, p95) in rows:
        print(f"  {label:62} {p50:8.0f} {p95:8.0f}")
    return 0


def _measure(rounds: int) -> list[tuple[str, tuple[float, float]]]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import PBKDF2PasswordHasher
    from django.db import connection
    from rest_framework.authtoken.models import Token
    from rest_framework.exceptions import Throttled
    from rest_framework.test import APIRequestFactory
    from rest_framework.throttling import SimpleRateThrottle

    from retrieval.agents.budget_windows import MemoryWindow, Rate
    from retrieval.agents.throttling import AgentThrottle, agent_budget_id, agent_budget_spend
    from retrieval.agents.tokens import AgentTokenAuthentication, token_digest, token_lookup, tool_token_issue

    issued = tool_token_issue(name=f"bench-{uuid.uuid4().hex[:6]}")
    # A plain-text DRF row, as the table held them before (for the "before" query only).
    legacy_user = get_user_model().objects.create(username=f"legacy-{uuid.uuid4().hex[:6]}")
    legacy = Token.objects.create(user=legacy_user)
    budget = agent_budget_id(issued.user)
    hasher = PBKDF2PasswordHasher()
    salt = secrets.token_hex(8)

    class OldThrottle(SimpleRateThrottle):
        rate = "600/min"

        def get_cache_key(self, request, view):
            return f"bench-old-{budget}"

    old = OldThrottle()
    memory, windows = MemoryWindow(), [("k", Rate(600, 60.0)), ("k-burst", Rate(600, 1.0))]
    factory = APIRequestFactory()
    # The budget rows spend up to 590 calls of one 600/min budget each: every call allowed, the
    # window filling as an agent at its limit fills it.
    spends = min(rounds, 590)

    def rest_auth_and_throttle():
        request = factory.get("/api/prompts/executor", HTTP_AUTHORIZATION=f"Token {issued.key}")
        user, token = AgentTokenAuthentication().authenticate(request)
        request.user, request.auth = user, token
        AgentThrottle().allow_request(request, None)

    # An agent past its budget, refused once: what each of its next requests costs.
    refused = tool_token_issue(name=f"bench-refused-{uuid.uuid4().hex[:6]}")
    refused_budget = agent_budget_id(refused.user)
    while agent_budget_spend(refused_budget) is None:
        pass

    def rest_auth_and_throttle_refused():
        request = factory.get("/api/prompts/executor", HTTP_AUTHORIZATION=f"Token {refused.key}")
        try:
            user, token = AgentTokenAuthentication().authenticate(request)
        except Throttled:
            return  # refused before the database, remembered
        request.user, request.auth = user, token
        AgentThrottle().allow_request(request, None)

    def fresh_budget():
        return f"bench-{uuid.uuid4().hex}"

    new_budget = fresh_budget()

    def drf_plain_lookup():
        Token.objects.select_related("user").filter(key=legacy.key).first()

    rows = [
        ("key lookup, before: DRF plain-text key = %s", _timed(drf_plain_lookup, rounds)),
        (
            "key lookup, now: HMAC-SHA256 digest + digest IN (...)",
            _timed(lambda: token_lookup(issued.key), rounds),
        ),
        ("  of which the HMAC-SHA256 digest alone", _timed(lambda: token_digest(issued.key), rounds)),
        (
            f"  a slow hash instead: PBKDF2-SHA256, {hasher.iterations:,} iterations",
            _timed(lambda: hasher.encode(issued.key, salt), max(3, rounds // 200)),
        ),
        (
            "budget, before: DRF SimpleRateThrottle on the Redis cache",
            _timed(lambda: old.allow_request(None, None), spends),
        ),
        ("budget, now: one Lua script on Redis", _timed(lambda: agent_budget_spend(new_budget), spends)),
        (
            "budget, embedded default: in-process window under a lock",
            _timed(lambda: memory.spend(windows), spends),
        ),
        ("REST auth + throttle of one request, now", _timed(rest_auth_and_throttle, spends)),
        (
            "  of an agent past its budget, refused again (key remembered)",
            _timed(rest_auth_and_throttle_refused, rounds),
        ),
    ]
    connection.close()
    return rows


if __name__ == "__main__":
    sys.exit(main())
