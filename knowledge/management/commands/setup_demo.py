"""First-start set-up for `make run`: a demo admin and an agent token, printed for the newcomer.

Safe to run again: existing users and tokens are kept and printed again.
"""

import json
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from config.env import VAR_DIR
from retrieval.tokens import tool_token_issue

DEMO_ADMIN = "admin"
DEMO_AGENT = "demo-agent"


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
        token = tool_token_issue(name=DEMO_AGENT)
        stored["agent_token"] = token.key
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        credentials_file.write_text(json.dumps(stored, indent=2))
        credentials_file.chmod(0o600)

        self.stdout.write(self.style.SUCCESS("agentkb demo credentials (also in var/demo-credentials.json)"))
        self.stdout.write(f"  admin login : {DEMO_ADMIN} / {password}")
        self.stdout.write(f"  agent token : {token.key}   (agent '{DEMO_AGENT}')")
