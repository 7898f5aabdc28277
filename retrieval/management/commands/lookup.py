import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from retrieval.services import lookup_knowledge


class Command(BaseCommand):
    help = (
        "Run lookup_knowledge for a person: prints what the agent gets, then the raw retrieval "
        "details (L0 matches, L1 scores and similarities, timings). Marks the session and records "
        "the call like an agent's, unless --dry-run."
    )

    def add_arguments(self, parser):
        parser.add_argument("query", help='the query, e.g. "数据库连接池配置"')
        parser.add_argument("--session", default="cli", help="session id (default: cli)")
        parser.add_argument("--top-k", type=int, default=None, help="chunks fetched from Milvus")
        parser.add_argument(
            "--dry-run", action="store_true", help="neither mark the session nor record an invocation"
        )
        parser.add_argument("--body-only", action="store_true", help="print only what the agent gets")

    def handle(self, *args, query: str, session: str, top_k, dry_run: bool, body_only: bool, **options):
        try:
            outcome = lookup_knowledge(
                query=query, session_id=session, top_k=top_k, dry_run=dry_run, source="cli"
            )
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
            ) from exc
        self.stdout.write("== what the agent gets")
        self.stdout.write(json.dumps(outcome.body, ensure_ascii=False, indent=2))
        if body_only:
            return
        self.stdout.write(
            f"== retrieval details (status {outcome.status}, invocation {outcome.invocation_id or '-'})"
        )
        self.stdout.write(json.dumps(outcome.details, ensure_ascii=False, indent=2, default=str))
