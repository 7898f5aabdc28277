"""Serve agentkb's MCP tools and prompts over stdio, for a local agent that starts this command."""

from django.core.management.base import BaseCommand

from retrieval.entrypoints.mcp_server import STDIO_AGENT, build_server


class Command(BaseCommand):
    help = (
        "Run the MCP server on stdin/stdout (tools lookup_knowledge, get_knowledge_map; prompts "
        "executor, planner). The streamable HTTP transport is served under /mcp/ by config.asgi."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--agent",
            default=STDIO_AGENT,
            help=f"agent name recorded on this server's tool invocations (default {STDIO_AGENT})",
        )

    def handle(self, *args, **options):
        # stdout is the protocol channel: nothing else may be written to it.
        build_server(agent=options["agent"]).run(transport="stdio")
