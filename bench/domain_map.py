"""Domain map figures: what the planner's map costs to serve, and what debouncing saves.

Builds DOMAINS x DOCUMENTS indexed documents (frontmatter-style covers / when_to_retrieve) in a
throw-away database (SQLite in a temp folder by default, or --database-url for MariaDB; never a
database named test*), then prints:

1. the knowledge map: selector build, YAML render, and GET /api/knowledge-map (YAML and JSON) and
   GET /api/prompts/planner through Django's full request stack with token auth: p50 / p95 ms,
   and the size of the map an LLM planner has to read;
2. debouncing: BURST changes to one domain, then the queued regenerations run in order (as the
   worker runs them, each a window after its change) against a local OpenAI-protocol server:
   LLM calls with the debounce vs without, and the time of one regeneration through HTTP;
3. the extractive summariser: documents summarised per second.

    .venv/bin/python bench/domain_map.py
    .venv/bin/python bench/domain_map.py --domains 20 --documents 1000 --repeat 30
    .venv/bin/python bench/domain_map.py --database-url mysql://root@127.0.0.1:3306/agentkb_bench_map

Prints figures only; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--domains", type=int, default=10)
    parser.add_argument("--documents", type=int, default=200, help="indexed documents per domain")
    parser.add_argument("--repeat", type=int, default=20, help="requests per endpoint")
    parser.add_argument("--burst", type=int, default=50, help="changes to one domain inside one window")
    parser.add_argument("--database-url", default="", help="mysql://... (default: SQLite in a temp folder)")
    return parser.parse_args()


def _environment(args: argparse.Namespace) -> None:
    var = tempfile.mkdtemp(prefix="agentkb-bench-map-")
    os.environ["AGENTKB_VAR_DIR"] = var
    if args.database_url:
        name = urlparse(args.database_url).path.lstrip("/")
        if not name or name.startswith("test"):
            sys.exit(f"--database-url: refusing database {name!r}: the benchmark needs a database of its own")
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{var}/bench.sqlite3"
    # Production-like request handling: no DEBUG query log.
    os.environ.update(
        DEBUG="false",
        SECRET_KEY="bench-" + "x" * 50,
        ALLOWED_HOSTS="testserver",
        SECURE_SSL_REDIRECT="false",
        CELERY_TASK_ALWAYS_EAGER="true",
        LLM_BASE_URL="",
        LOG_LEVEL="WARNING",
        API_THROTTLE_TOOL="1000000/min",
        API_THROTTLE_TOOL_BURST="",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    os.environ.pop("REDIS_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms"


def _time(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    args = _parse_args()
    _environment(args)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS api_document")  # a clean corpus each run
    call_command("migrate", verbosity=0, interactive=False)

    from django.conf import settings
    from django.test.utils import setup_test_environment
    from django.utils import timezone
    from rest_framework.test import APIClient

    from knowledge.models import ApiDocument, KnowledgeDomain
    from knowledge.selectors import knowledge_map_build, knowledge_map_yaml
    from knowledge.services.domains import domain_documents_changed
    from knowledge.summaries import extractive_document_summary
    from retrieval.agents.tokens import tool_token_issue
    from tests.support.domain_map import good_answers
    from tests.support.fake_openai import FakeOpenAI

    setup_test_environment()
    ApiDocument.objects.all().delete()
    KnowledgeDomain.objects.all().delete()
    total = args.domains * args.documents
    print(f"agentkb domain map benchmark: {args.domains} domains x {args.documents} documents = {total:,}")
    print(f"database: {connection.vendor}")

    started = time.perf_counter()
    rows = []
    for d in range(args.domains):
        domain_id = f"domain-{d:02}"
        for i in range(args.documents):
            rows.append(
                ApiDocument(
                    doc_key=f"{domain_id}/doc-{i:05}.md",
                    title=f"{domain_id} 文档 {i:05} troubleshooting guide",
                    domain=domain_id,
                    content="x",
                    content_hash=f"h{d}-{i}",
                    status=ApiDocument.Status.INDEXED,
                    indexed_at=timezone.now(),
                    metadata={
                        "covers": [f"场景 {i} A", f"场景 {i} B", f"scenario {i} C"],
                        "covers_source": "manual",
                        "when_to_retrieve": f"问题涉及 {domain_id} 场景 {i} 时",
                        "when_to_retrieve_source": "manual",
                    },
                )
            )
    ApiDocument.objects.bulk_create(rows, batch_size=2000)
    KnowledgeDomain.objects.bulk_create(
        [
            KnowledgeDomain(
                domain_id=f"domain-{d:02}",
                description=f"domain {d} description",
                when_to_retrieve=f"用户问题涉及 domain-{d:02} 时检索；优先检索一次，勿重复",
                document_count=args.documents,
                summary_source="llm",
            )
            for d in range(args.domains)
        ]
    )
    print(f"corpus loaded in {time.perf_counter() - started:.1f} s\n")

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {tool_token_issue(name='bench-planner').key}")
    size = len(client.get("/api/knowledge-map").content)
    prompt_size = len(client.get("/api/prompts/planner").content.decode())

    print("1. knowledge map")
    print(f"   selector build              {_ms(_time(knowledge_map_build, args.repeat))}")
    built = knowledge_map_build()
    print(f"   YAML render                 {_ms(_time(lambda: knowledge_map_yaml(built), args.repeat))}")
    for label, path in (
        ("GET /api/knowledge-map", "/api/knowledge-map"),
        ("GET /api/knowledge-map json", "/api/knowledge-map?format=json"),
        ("GET /api/prompts/planner", "/api/prompts/planner"),
    ):
        samples = _time(lambda p=path: client.get(p), args.repeat)
        print(f"   {label:<28}{_ms(samples)}")
    print(f"   map size: {size / 1024:,.1f} KiB YAML; planner prompt {prompt_size:,} characters\n")

    print(f"2. debounce: {args.burst} changes to one domain inside one window")
    with FakeOpenAI(responder=good_answers) as llm:
        settings.LLM_BASE_URL = llm.base_url
        settings.LLM_MAX_RETRIES = 0
        burst_domain = "domain-00"
        from django.db import transaction

        queued = []
        original_on_commit = transaction.on_commit
        transaction.on_commit = lambda fn, using=None, robust=False: queued.append(fn)
        try:
            for _ in range(args.burst):
                domain_documents_changed(domain_id=burst_domain)
        finally:
            transaction.on_commit = original_on_commit
        started = time.perf_counter()
        for send in queued:
            send()
        elapsed = time.perf_counter() - started
        with_debounce = llm.call_count
        llm.reset()
        from knowledge.services.domains import domain_summary_regenerate

        one = _time(lambda: domain_summary_regenerate(domain_id=burst_domain), 5)
        print(f"   LLM calls with the debounce: {with_debounce}   without: {args.burst}")
        print(
            f"   {args.burst} queued runs drained in {elapsed * 1000:.0f} ms ({args.burst - 1} exit at once)"
        )
        print(f"   one regeneration ({args.documents} documents, fake LLM over HTTP): {_ms(one)}")
        settings.LLM_BASE_URL = ""
        extractive_one = _time(lambda: domain_summary_regenerate(domain_id=burst_domain), 5)
        print(f"   one regeneration, extractive:                   {_ms(extractive_one)}\n")

    print("3. extractive summariser")
    text = "# 支付失败排查手册\n\n" + "\n\n".join(f"## 场景 {i}\n\n" + "正文。" * 200 for i in range(12))
    count = 2000
    started = time.perf_counter()
    for _ in range(count):
        extractive_document_summary(title="支付失败排查手册", content=text)
    elapsed = time.perf_counter() - started
    print(f"   {count / elapsed:,.0f} documents/s ({len(text):,}-character documents, 12 sections)")


if __name__ == "__main__":
    main()
