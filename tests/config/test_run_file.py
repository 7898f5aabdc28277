"""Commands find the running service: `make run` writes var/run.json, manage.py reads it.

The unit tests drive config/runfile.py; the slow one runs the real `manage.py lookup`,
`check_index` and `calibrate_thresholds` in subprocesses beside a loopback milvus-lite server,
with no MILVUS_URI in their environment, and checks they used that server.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from config.runfile import (
    RUN_FILE_NAME,
    command_name,
    embedded_store_refusal,
    run_file_apply,
    run_file_read,
    run_file_write,
)
from tests.conftest import REPO, stop_process, wait_for_port


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_live_run_file_sets_milvus_uri_when_the_environment_has_none(tmp_path):
    run_file_write(folder=tmp_path, milvus_uri="http://127.0.0.1:24555", port=24556, pid=os.getpid())
    environ: dict[str, str] = {}
    err = io.StringIO()
    run = run_file_apply(environ, tmp_path, err)
    assert run is not None and run.port == 24556
    assert environ["MILVUS_URI"] == "http://127.0.0.1:24555"
    assert "from " + str(tmp_path / RUN_FILE_NAME) in err.getvalue()


def test_the_environment_always_wins(tmp_path):
    run_file_write(folder=tmp_path, milvus_uri="http://127.0.0.1:24555", port=24556, pid=os.getpid())
    environ = {"MILVUS_URI": "http://milvus.internal:19530"}
    assert run_file_apply(environ, tmp_path, io.StringIO()) is None
    assert environ["MILVUS_URI"] == "http://milvus.internal:19530"


def test_a_stale_run_file_is_ignored_with_a_message(tmp_path):
    run_file_write(folder=tmp_path, milvus_uri="http://127.0.0.1:24555", port=24556, pid=_dead_pid())
    environ: dict[str, str] = {}
    err = io.StringIO()
    assert run_file_apply(environ, tmp_path, err) is None
    assert "MILVUS_URI" not in environ
    assert "is gone" in err.getvalue()


def test_a_malformed_run_file_is_ignored_naming_it(tmp_path):
    (tmp_path / RUN_FILE_NAME).write_text('{"port": 1}')
    err = io.StringIO()
    assert run_file_apply({}, tmp_path, err) is None
    assert "has no milvus_uri" in err.getvalue()
    with pytest.raises(ValueError, match="not readable JSON"):
        (tmp_path / RUN_FILE_NAME).write_text("{")
        run_file_read(tmp_path)


def test_the_run_file_is_written_whole(tmp_path):
    path = run_file_write(folder=tmp_path / "var", milvus_uri="http://h:1", port=2, pid=3)
    assert json.loads(path.read_text()) == {"milvus_uri": "http://h:1", "port": 2, "pid": 3}
    assert not list((tmp_path / "var").glob("*.tmp"))


def test_an_empty_embedded_store_beside_the_server_data_is_refused(tmp_path):
    assert embedded_store_refusal(tmp_path) is None  # a fresh clone: nothing anywhere
    (tmp_path / "milvus").mkdir()
    assert embedded_store_refusal(tmp_path) is None  # an empty server folder holds nothing
    (tmp_path / "milvus" / "collections").mkdir()
    refusal = embedded_store_refusal(tmp_path)
    assert (
        refusal and "make run" in refusal and "MILVUS_URI" in refusal and str(tmp_path / "milvus") in refusal
    )
    (tmp_path / "milvus.db").write_bytes(b"")
    assert embedded_store_refusal(tmp_path) is None  # the embedded store is in use on purpose


def test_command_name_skips_options():
    assert command_name(["manage.py", "check_index", "--repair"]) == "check_index"
    assert command_name(["manage.py"]) is None


def _free_port_in_our_range() -> int:
    for port in range(24600, 24700):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 24600-24699")


def _manage(var: Path, *args: str, eager: bool = False) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"MILVUS_URI", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(AGENTKB_VAR_DIR=str(var), MILVUS_COLLECTION=COLLECTION, LEXICAL_INDEX_DIR=str(var / "lexical"))
    # Eager: an import indexes in the command itself (no worker runs beside this test).
    env["CELERY_TASK_ALWAYS_EAGER"] = "true" if eager else "false"
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=240
    )


COLLECTION = f"t_runfile_{uuid.uuid4().hex[:8]}"
POOL = REPO / "knowledge" / "demo_corpus" / "infrastructure" / "database-connection-pool.md"


@pytest.mark.slow
def test_commands_beside_make_run_use_its_milvus(tmp_path):
    var = tmp_path / "var"
    port = _free_port_in_our_range()
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "milvus-lite"),
            "server",
            "--data-dir",
            str(var / "milvus"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc=server)
        uri = f"http://127.0.0.1:{port}"
        assert _manage(var, "migrate", "--noinput").returncode == 0
        run_file_write(folder=var, milvus_uri=uri, port=24999, pid=server.pid)
        # A document indexed through the running store (indexing in the command, as eager tasks).
        imported = _manage(var, "import_documents", str(POOL), "--domain", "infrastructure", eager=True)
        assert imported.returncode == 0, imported.stderr
        assert f"MILVUS_URI={uri} from {var / RUN_FILE_NAME}" in imported.stderr

        check = _manage(var, "check_index")
        assert f"MILVUS_URI={uri} from {var / RUN_FILE_NAME}" in check.stderr
        # The imported document's vectors are found (the embedded store would report them missing).
        assert check.returncode == 0 and "index consistent" in check.stdout, check.stdout
        assert re.search(r"1 documents, (\d+) chunks, \1 vectors", check.stdout), check.stdout

        lookup = _manage(var, "lookup", "数据库连接池配置", "--dry-run")
        assert lookup.returncode == 0, lookup.stderr
        assert f"MILVUS_URI={uri}" in lookup.stderr
        details = json.loads(lookup.stdout.split("== retrieval details", 1)[1].split("\n", 1)[1])
        assert details["l1_top_similarity"] is not None  # the vectors were searched, and found

        queries = tmp_path / "q.jsonl"
        queries.write_text('{"query": "数据库连接池配置", "expected": "database-connection-pool.md"}\n')
        calibrate = _manage(var, "calibrate_thresholds", "--queries", str(queries))
        assert calibrate.returncode == 0, calibrate.stderr
        assert f"MILVUS_URI={uri}" in calibrate.stderr
        assert "; 0 without any candidate" in calibrate.stdout
        assert not (var / "milvus.db").exists()  # no command opened the embedded store
    finally:
        stop_process(server)

    # The service stopped: the run file is stale, and a store command refuses the empty default.
    refused = _manage(var, "check_index")
    assert refused.returncode == 1
    assert "is gone" in refused.stderr and "would open a new, empty embedded store" in refused.stderr
    assert not (var / "milvus.db").exists()
