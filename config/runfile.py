"""The run file: what `make run` started, so commands in another shell use the same services.

`make run` writes ``var/run.json`` (the Milvus URI, the web port, and the pid that becomes
honcho's) just before it starts the processes. ``manage.py`` reads it when the environment
(the shell or ``.env``) sets no ``MILVUS_URI``: without it, a command run beside the service
would open the embedded ``var/milvus.db``, an empty store, and report "not found" or offer to
repair an index that is fine. The environment always wins; a file whose process is gone is
ignored with a message.

    python config/runfile.py --pid 1234 --port 8000 --milvus-uri http://127.0.0.1:19530

``manage.py`` asks for this by setting ``AGENTKB_READ_RUN_FILE=1`` before the settings load
(config/settings/services.py applies it); the web and worker processes that `make run` starts
get MILVUS_URI from it directly, and the tests never read it. This module imports nothing from
Django.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

BASE_DIR = Path(__file__).resolve().parent.parent
RUN_FILE_NAME = "run.json"
# The folder `make run`'s milvus-lite server keeps its data in (Procfile: --data-dir var/milvus).
SERVER_DATA_DIR_NAME = "milvus"
EMBEDDED_DB_NAME = "milvus.db"

# Commands that open the vector store (or the lexical index beside it). Opening the embedded
# default there while the data is in `make run`'s server would create and use an empty store.
STORE_COMMANDS = frozenset(
    {
        "calibrate_thresholds",
        "check_index",
        "export_documents",
        "import_documents",
        "lookup",
        "regenerate_domains",
        "reindex",
        "requeue_pending",
        "setup_demo",
        "sync_documents",
    }
)


@dataclass(frozen=True)
class RunFile:
    path: Path
    milvus_uri: str
    port: int | None
    pid: int


def var_dir(environ: dict[str, str] | os._Environ[str]) -> Path:
    """The var folder, as config.env computes it (AGENTKB_VAR_DIR, else ./var)."""
    return Path(environ.get("AGENTKB_VAR_DIR") or BASE_DIR / "var").resolve()


def run_file_write(*, folder: Path, milvus_uri: str, port: int, pid: int) -> Path:
    """Write the run file whole (a temporary file renamed over it): a reader never sees half."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RUN_FILE_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"milvus_uri": milvus_uri, "port": port, "pid": pid}, indent=2) + "\n")
    tmp.replace(path)
    return path


def run_file_read(folder: Path) -> RunFile | None:
    """The run file in ``folder``, or None when there is none. A malformed one raises ValueError."""
    path = folder / RUN_FILE_NAME
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("milvus_uri"), str):
        raise ValueError(f"{path} has no milvus_uri")
    if not isinstance(data.get("pid"), int):
        raise ValueError(f"{path} has no pid")
    port = data.get("port")
    return RunFile(path, data["milvus_uri"], port if isinstance(port, int) else None, data["pid"])


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    return True


def run_file_apply(
    environ: dict[str, str] | os._Environ[str], folder: Path, stderr: TextIO
) -> RunFile | None:
    """Set MILVUS_URI from a live run file when the environment has none; the file applied."""
    if environ.get("MILVUS_URI"):
        return None
    try:
        run = run_file_read(folder)
    except ValueError as exc:
        stderr.write(f"agentkb: ignoring the run file: {exc}\n")
        return None
    if run is None:
        return None
    if not process_alive(run.pid):
        stderr.write(f"agentkb: ignoring {run.path}: the `make run` that wrote it (pid {run.pid}) is gone\n")
        return None
    environ["MILVUS_URI"] = run.milvus_uri
    stderr.write(f"agentkb: MILVUS_URI={run.milvus_uri} from {run.path} (`make run`, pid {run.pid})\n")
    return run


def embedded_store_refusal(folder: Path) -> str | None:
    """Why a store command must not run on the embedded default here, or None when it may.

    Called only when nothing chose the store (no MILVUS_URI, no live run file): refuses when the
    embedded file does not exist yet while `make run`'s server folder holds data. Setting
    MILVUS_URI (to a server, or to a path for the embedded store on purpose) always lets it run.
    """
    server_dir = folder / SERVER_DATA_DIR_NAME
    if (folder / EMBEDDED_DB_NAME).exists() or not server_dir.is_dir() or not any(server_dir.iterdir()):
        return None
    return (
        f"no MILVUS_URI is set and no running `make run` was found, so this command would open a "
        f"new, empty embedded store ({folder / EMBEDDED_DB_NAME}) while the data is in the "
        f"milvus-lite server's folder {server_dir}. Start the service with `make run` (commands "
        f"then find it through {folder / RUN_FILE_NAME}), or set MILVUS_URI, e.g. "
        f"MILVUS_URI=http://127.0.0.1:19530, to the server that holds it."
    )


def command_name(argv: list[str]) -> str | None:
    """The subcommand of a ``manage.py`` command line (its first argument that is not an option)."""
    for arg in argv[1:]:
        if not arg.startswith("-"):
            return arg
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write var/run.json for `make run`.")
    parser.add_argument("--milvus-uri", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the process that serves (honcho)")
    args = parser.parse_args(argv)
    path = run_file_write(
        folder=var_dir(os.environ), milvus_uri=args.milvus_uri, port=args.port, pid=args.pid
    )
    print(f"  run file   {path} (commands in other shells use this Milvus)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
