"""Run a conversion in a child process with a memory ceiling and a time limit.

The parent (the indexing worker) starts ``python -m knowledge.converters.sandbox``, writes a
small JSON header and the file's bytes to its stdin and reads a JSON result from its stdout.
The child sets its own limits first thing (``RLIMIT_AS`` = ``INGEST_CONVERT_MEMORY_MB``, a CPU
limit one second past the timeout) and imports no Django. If it runs out of memory, crashes in
a C library or is killed at ``INGEST_CONVERT_TIMEOUT_SECONDS``, only the child dies; the parent
turns that into a ConversionError naming the limit, and the document ends FAILED with it.

A subprocess rather than ``multiprocessing``: a Celery prefork child is daemonic and may not
fork children of its own, and forking a process that holds gRPC channels is unsafe.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from knowledge.converters import ConversionError, Converted, Limits

_ROOT = Path(__file__).resolve().parents[2]


def convert_isolated(data: bytes, *, fmt: str, limits: Limits, timeout: float, memory_mb: int) -> Converted:
    """Convert ``data`` in a child process; raises ConversionError with the reason."""
    header = json.dumps(
        {
            "format": fmt,
            "max_pages": limits.max_pages,
            "max_chars": limits.max_chars,
            "max_unzipped_bytes": limits.max_unzipped_bytes,
            "memory_mb": memory_mb,
            "cpu_seconds": int(timeout) + 1,
        }
    ).encode()
    payload = len(header).to_bytes(4, "big") + header + data
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "knowledge.converters.sandbox"],
            input=payload,
            capture_output=True,
            timeout=timeout,
            cwd=_ROOT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConversionError(
            f"conversion took longer than {timeout:g} s (INGEST_CONVERT_TIMEOUT_SECONDS); the file may be hostile"
        ) from exc
    if completed.returncode != 0 or not completed.stdout:
        if completed.returncode < 0:
            name = signal.Signals(-completed.returncode).name
            if -completed.returncode in (signal.SIGXCPU, signal.SIGKILL):
                raise ConversionError(
                    f"conversion was stopped ({name}) at its CPU limit (INGEST_CONVERT_TIMEOUT_SECONDS)"
                )
            raise ConversionError(
                f"the converter crashed ({name}); the file may be hostile or need more than "
                f"{memory_mb} MB (INGEST_CONVERT_MEMORY_MB)"
            )
        tail = completed.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        if "MemoryError" in tail[0] or "memory" in tail[0].lower():
            raise ConversionError(f"conversion needed more than {memory_mb} MB (INGEST_CONVERT_MEMORY_MB)")
        raise ConversionError(f"the converter failed (exit {completed.returncode}): {tail[0][:300]}")
    result = json.loads(completed.stdout)
    if "error" in result:
        raise ConversionError(result["error"])
    return Converted(**result)


def _child() -> int:
    import resource

    stdin = sys.stdin.buffer
    length = int.from_bytes(stdin.read(4), "big")
    header = json.loads(stdin.read(length))
    memory = int(header["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(header["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    data = stdin.read()
    from knowledge.converters import convert

    limits = Limits(
        max_pages=int(header["max_pages"]),
        max_chars=int(header["max_chars"]),
        max_unzipped_bytes=int(header["max_unzipped_bytes"]),
    )
    try:
        result = convert(data, fmt=header["format"], limits=limits).as_dict()
    except ConversionError as exc:
        result = {"error": exc.reason}
    except MemoryError:
        result = {"error": f"conversion needed more than {header['memory_mb']} MB (INGEST_CONVERT_MEMORY_MB)"}
    except RecursionError:
        result = {"error": "the file is nested too deeply to convert"}
    sys.stdout.write(json.dumps(result, ensure_ascii=False))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child())
