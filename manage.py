#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # A command run beside `make run` uses the Milvus it started (var/run.json) unless the
    # environment names one: the settings read the run file when asked to (config/runfile.py).
    os.environ["AGENTKB_READ_RUN_FILE"] = "1"
    refuse_an_empty_embedded_store(sys.argv)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


def refuse_an_empty_embedded_store(argv: list[str]) -> None:
    """A store command that nothing pointed at a Milvus, while `make run`'s server folder holds
    the data, would open a new, empty embedded store: say so and stop instead."""
    if "--help" in argv or "-h" in argv:
        return
    from config.runfile import STORE_COMMANDS, command_name, embedded_store_refusal

    if command_name(argv) not in STORE_COMMANDS:
        return
    from django.conf import settings

    if getattr(settings, "MILVUS_URI_SOURCE", "environment") != "default":
        return
    refusal = embedded_store_refusal(settings.VAR_DIR)
    if refusal:
        sys.stderr.write(f"CommandError: {refusal}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
