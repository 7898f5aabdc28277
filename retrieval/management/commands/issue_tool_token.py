from django.core.management.base import BaseCommand, CommandError

from retrieval.agents.tokens import tool_token_issue


class Command(BaseCommand):
    help = "Issue (or show) the API token of an agent. The key is printed alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("name", help="agent name, e.g. support-bot")
        parser.add_argument("--rotate", action="store_true", help="replace the existing key")

    def handle(self, *args, name: str, rotate: bool, **options):
        try:
            token = tool_token_issue(name=name, rotate=rotate)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(f"Token for agent '{name}' (send as 'Authorization: Token <key>'):")
        self.stdout.write(token.key)
