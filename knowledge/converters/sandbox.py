"""Run conversions in a child process with a memory ceiling and a time limit.

The parent (the indexing worker) starts ``python -m knowledge.converters.sandbox`` and sends it
files, one frame each (a small JSON header and the file's bytes) on its stdin; the child answers
each with a JSON result on its stdout. The child sets its limits first thing (``RLIMIT_AS`` =
``INGEST_CONVERT_MEMORY_MB``; before every file a CPU limit one second past the timeout, counted
from what it has used so far) and imports no Django. If it runs out of memory, crashes in a C
library or is killed at ``INGEST_CONVERT_TIMEOUT_SECONDS``, only the child dies, and only the
file it was converting fails: the parent turns that into a ConversionError naming the limit, the
document ends FAILED with it, and the next file gets a new child.

One child serves a whole indexing run (``ConversionSandbox``): starting Python and importing the
converters is most of what a child per file costs (``bench/convert.py``). A reused child could
carry memory from earlier files, so a file that runs out of memory in a reused child is tried
again in a fresh one before it is refused, and a child is replaced after
``FILES_PER_CHILD`` files. ``convert_isolated`` converts one file in a child of its own.

A subprocess rather than ``multiprocessing``: a Celery prefork child is daemonic and may not
fork children of its own, and forking a process that holds gRPC channels is unsafe.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from knowledge.converters.base import ConversionError, Converted, Limits

_ROOT = Path(__file__).resolve().parents[2]

#: files one child converts before it is replaced (bounds what a long run can accumulate)
FILES_PER_CHILD = 50


class _Refused(Exception):
    """The file was refused (``error``); ``memory``: for memory, or the child crashed."""

    def __init__(self, error: ConversionError, *, memory: bool) -> None:
        super().__init__(error.reason)
        self.error = error
        self.memory = memory


class ConversionSandbox:
    """A conversion child reused across files; ``close()`` (or ``with``) ends it."""

    def __init__(self, *, limits: Limits, timeout: float, memory_mb: int) -> None:
        self.limits, self.timeout, self.memory_mb = limits, float(timeout), int(memory_mb)
        self._proc: subprocess.Popen | None = None
        self._stderr = None
        self._served = 0
        #: children started so far (the benchmark and tests read it)
        self.children_started = 0

    def __enter__(self) -> ConversionSandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def convert(self, data: bytes, *, fmt: str) -> Converted:
        """Convert ``data`` in the child; raises ConversionError with the reason."""
        reused = self._proc is not None
        try:
            return self._attempt(data, fmt)
        except _Refused as refused:
            if not (refused.memory and reused):
                raise refused.error from None
        # Out of memory (or crashed) in a child that had converted other files: judge this file
        # in a fresh child, so what earlier files left behind cannot refuse it.
        try:
            return self._attempt(data, fmt)
        except _Refused as again:
            raise again.error from None

    def _attempt(self, data: bytes, fmt: str) -> Converted:
        result = self._exchange(data, fmt)
        if "error" in result:
            if result.get("memory"):
                self.close()  # a child that ran out of memory is not trusted with another file
            raise _Refused(ConversionError(result["error"]), memory=bool(result.get("memory")))
        return Converted(**result)

    def close(self, *, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if kill:
                proc.kill()
            try:
                if proc.stdin:
                    proc.stdin.close()
                proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            finally:
                if proc.stdout:
                    proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._served = 0

    # --- the parent's side of the protocol ---------------------------------------------------
    def _start(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", "")) if p),
        }
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        header = json.dumps({"memory_mb": self.memory_mb}).encode()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "knowledge.converters.sandbox"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=_ROOT,
            env=env,
        )
        self.children_started += 1
        self._proc.stdin.write(len(header).to_bytes(4, "big") + header)

    def _exchange(self, data: bytes, fmt: str) -> dict:
        if self._proc is not None and self._served >= FILES_PER_CHILD:
            self.close()
        if self._proc is None:
            self._start()
        proc = self._proc
        self._served += 1
        stderr_from = self._stderr.seek(0, os.SEEK_END)
        header = json.dumps(
            {
                "format": fmt,
                "size": len(data),
                "max_pages": self.limits.max_pages,
                "max_chars": self.limits.max_chars,
                "max_unzipped_bytes": self.limits.max_unzipped_bytes,
                "cpu_seconds": int(self.timeout) + 1,
            }
        ).encode()
        deadline = time.monotonic() + self.timeout
        try:
            proc.stdin.write(len(header).to_bytes(4, "big") + header + data)
            proc.stdin.flush()
            length = int.from_bytes(self._read(proc, 4, deadline), "big")
            return json.loads(self._read(proc, length, deadline))
        except TimeoutError:
            self.close(kill=True)
            raise _Refused(
                ConversionError(
                    f"conversion took longer than {self.timeout:g} s (INGEST_CONVERT_TIMEOUT_SECONDS); "
                    "the file may be hostile"
                ),
                memory=False,
            ) from None
        except (BrokenPipeError, EOFError, ValueError):
            died = self._died(proc, stderr_from)
            self.close()
            raise died from None

    @staticmethod
    def _read(proc: subprocess.Popen, size: int, deadline: float) -> bytes:
        fd = proc.stdout.fileno()
        chunks, got = [], 0
        while got < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(size - got, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _died(self, proc: subprocess.Popen, stderr_from: int) -> _Refused:
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code < 0:
            name = signal.Signals(-code).name
            if -code in (signal.SIGXCPU, signal.SIGKILL):
                return _Refused(
                    ConversionError(
                        f"conversion was stopped ({name}) at its CPU limit (INGEST_CONVERT_TIMEOUT_SECONDS)"
                    ),
                    memory=False,
                )
            return _Refused(
                ConversionError(
                    f"the converter crashed ({name}); the file may be hostile or need more than "
                    f"{self.memory_mb} MB (INGEST_CONVERT_MEMORY_MB)"
                ),
                memory=True,
            )
        self._stderr.seek(stderr_from)
        tail = self._stderr.read().decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        if "MemoryError" in tail[0] or "memory" in tail[0].lower():
            return _Refused(
                ConversionError(
                    f"conversion needed more than {self.memory_mb} MB (INGEST_CONVERT_MEMORY_MB)"
                ),
                memory=True,
            )
        return _Refused(ConversionError(f"the converter failed (exit {code}): {tail[0][:300]}"), memory=False)


def convert_isolated(data: bytes, *, fmt: str, limits: Limits, timeout: float, memory_mb: int) -> Converted:
    """Convert ``data`` in a child process of its own; raises ConversionError with the reason."""
    with ConversionSandbox(limits=limits, timeout=timeout, memory_mb=memory_mb) as sandbox:
        return sandbox.convert(data, fmt=fmt)


# --- the child -----------------------------------------------------------------------------------
def _read_exactly(stream, size: int) -> bytes | None:
    data = stream.read(size)
    if len(data) < size:
        return None  # the parent closed our stdin: done
    return data


def _frame(stream) -> dict | None:
    head = _read_exactly(stream, 4)
    if head is None:
        return None
    return json.loads(_read_exactly(stream, int.from_bytes(head, "big")) or b"{}")


def _child() -> int:
    import resource

    stdin = sys.stdin.buffer
    # Our answers go to a private copy of stdout; anything a library prints goes to stderr and
    # cannot break the framing.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    start = _frame(stdin)
    if start is None:
        return 0
    memory = int(start["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    from knowledge.converters import convert

    while (header := _frame(stdin)) is not None:
        data = _read_exactly(stdin, int(header["size"])) or b""
        # The CPU limit counts the child's whole life: give each file its own allowance.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        used = int(usage.ru_utime + usage.ru_stime) + 1
        cpu = used + int(header["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.RLIM_INFINITY))
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
            result = {
                "error": f"conversion needed more than {start['memory_mb']} MB (INGEST_CONVERT_MEMORY_MB)",
                "memory": True,
            }
        except RecursionError:
            result = {"error": "the file is nested too deeply to convert"}
        del data
        body = json.dumps(result, ensure_ascii=False).encode()
        answers.write(len(body).to_bytes(4, "big") + body)
        answers.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child())
