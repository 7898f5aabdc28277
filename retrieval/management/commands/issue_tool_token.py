from django.core.management.base import BaseCommand, CommandError

from retrieval.agents.tokens import TokenExists, tool_token_issue


class Command(BaseCommand):
    help = (
        "Issue an agent's API token. The key is printed alone on the last line, this once: only a "
        "hash of it is stored. An agent that has a token gets a new one with --rotate."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="agent name, e.g. support-bot")
        parser.add_argument(
            "--rotate", action="store_true", help="replace the existing key (it stops working at once)"
        )

    def handle(self, *args, name: str, rotate: bool, **options):
        try:
            issued = tool_token_issue(name=name, rotate=rotate)
        except TokenExists as exc:
            raise CommandError(f"{exc}: issue_tool_token {name} --rotate") from exc
        except ValueError as exc:  # an invalid name
            raise CommandError(str(exc)) from exc
        self.stderr.write(
            f"Token for agent '{name}' (send as 'Authorization: Token <key>'; shown this once, "
            f"listed in the admin as {issued.prefix}…):"
        )
        self.stdout.write(issued.key)
