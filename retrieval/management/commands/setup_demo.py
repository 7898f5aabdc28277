"""First-start set-up for `make run`: a demo admin, an agent token and the demo knowledge base.

It lives in retrieval because it issues a tool token (retrieval.agents.tokens): retrieval may import
knowledge, never the other way round.

Safe to run again: existing users and tokens are kept and printed again (the demo agent's key is
read back from var/demo-credentials.json: only a hash of it is in the database; a key that no
longer works there is replaced by a new one), and the demo knowledge
base (knowledge/demo_corpus) is loaded once only: documents deleted later do not come back.
Loading stores the documents and queues their indexing; the worker started by `make run` indexes
them (the vector store is not needed here).
"""

import json
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

import knowledge
from config.env import VAR_DIR
from knowledge.models import ApiDocument
from knowledge.services.documents import FAILED
from knowledge.services.uploads import folder_items, items_ingest
from retrieval.agents.tokens import token_user, tool_token_issue

DEMO_ADMIN = "admin"
DEMO_AGENT = "demo-agent"
DEMO_CORPUS = Path(knowledge.__file__).resolve().parent / "demo_corpus"


class Command(BaseCommand):
    help = "Create the demo admin user and agent token (idempotent) and print how to use them."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            self.stderr.write("setup_demo is for the embedded default (DEBUG on); nothing done.")
            return
        credentials_file = VAR_DIR / "demo-credentials.json"
        stored = json.loads(credentials_file.read_text()) if credentials_file.exists() else {}

        user_model = get_user_model()
        admin = user_model.objects.filter(username=DEMO_ADMIN).first()
        if admin is None:
            password = secrets.token_urlsafe(9)
            user_model.objects.create_superuser(DEMO_ADMIN, email="admin@example.com", password=password)
            stored["admin_password"] = password
        password = stored.get("admin_password", "(unchanged: set before this file existed)")
        key = self._demo_agent_key(stored.get("agent_token", ""))
        stored["agent_token"] = key
        corpus_note = self._load_demo_corpus(stored)
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        credentials_file.write_text(json.dumps(stored, indent=2))
        credentials_file.chmod(0o600)

        self.stdout.write(self.style.SUCCESS("agentkb demo credentials (also in var/demo-credentials.json)"))
        self.stdout.write(f"  admin login : {DEMO_ADMIN} / {password}")
        self.stdout.write(f"  agent token : {key}   (agent '{DEMO_AGENT}')")
        self.stdout.write(f"  knowledge   : {corpus_note}")

    def _demo_agent_key(self, stored_key: str) -> str:
        """The demo agent's key: the stored one while it still works, else a new one."""
        user = token_user(stored_key)
        if user is not None and user.get_username() == DEMO_AGENT:
            return stored_key
        return tool_token_issue(name=DEMO_AGENT, rotate=True).key

    def _load_demo_corpus(self, stored: dict) -> str:
        """Load the demo knowledge base on first start only (remembered in demo-credentials.json)."""
        if stored.get("demo_corpus_loaded"):
            return f"{ApiDocument.objects.count()} documents (demo knowledge base loaded before)"
        if ApiDocument.objects.exists():
            stored["demo_corpus_loaded"] = True
            return f"{ApiDocument.objects.count()} documents (yours; demo knowledge base not loaded)"
        results = items_ingest(items=folder_items([DEMO_CORPUS]))
        failed = [r for r in results if r.outcome == FAILED]
        for result in failed:
            self.stderr.write(f"demo document {result.name} not loaded: {result.error}")
        stored["demo_corpus_loaded"] = True
        domains = sorted({r.document.domain for r in results if r.document is not None})
        return (
            f"demo knowledge base loaded: {len(results) - len(failed)} documents in {', '.join(domains)} "
            "(the worker indexes them in the background)"
        )
