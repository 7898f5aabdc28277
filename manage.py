#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # A command run beside `make run` uses the Milvus it started (var/run.json) unless the
    # environment names one: the settings read the run file when asked to (config/runfile.py).
    os.environ["AGENTKB_READ_RUN_FILE"] = "1"
    from django.conf import settings

    from config.runfile import STORE_COMMANDS, command_name, embedded_store_refusal

    asks_help = "--help" in sys.argv or "-h" in sys.argv
    if settings.MILVUS_URI_SOURCE == "default" and command_name(sys.argv) in STORE_COMMANDS and not asks_help:
        refusal = embedded_store_refusal(settings.VAR_DIR)
        if refusal:
            sys.stderr.write(f"CommandError: {refusal}\n")
            sys.exit(1)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
