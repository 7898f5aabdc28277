"""gunicorn's hooks for the metrics folder (config/gunicorn_conf.py): at start the folder is set
for the workers and cleaned of the files of processes that no longer run, while a live process
sharing it keeps its counts; a worker that exits is marked dead without losing its counts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from config import gunicorn_conf
from config.env import VAR_DIR
from tests.conftest import REPO

_RECORD = textwrap.dedent(
    """
    import sys
    from observability.prometheus import budget_refusal_count
    budget_refusal_count("tool")
    print("recorded", flush=True)
    if sys.argv[1] == "stay":
        sys.stdin.read()  # alive until the test closes its stdin
    """
)


def _recorder(folder, mode: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", _RECORD, mode],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "recorded"
    return proc


def test_start_removes_dead_processes_files_and_keeps_a_live_ones(tmp_path, monkeypatch):
    folder = tmp_path / "prometheus"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(folder))
    gone = _recorder(folder, "exit")
    assert gone.wait(timeout=60) == 0
    alive = _recorder(folder, "stay")
    try:
        assert {p.name for p in folder.iterdir()} == {f"counter_{gone.pid}.db", f"counter_{alive.pid}.db"}

        assert gunicorn_conf.metrics_folder_prepare() == folder
        assert {p.name for p in folder.iterdir()} == {f"counter_{alive.pid}.db"}

        # A worker that exits: marked dead, its counts stay in the sums.
        gunicorn_conf.child_exit(server=None, worker=SimpleNamespace(pid=alive.pid))
        assert {p.name for p in folder.iterdir()} == {f"counter_{alive.pid}.db"}
    finally:
        alive.stdin.close()
        alive.wait(timeout=60)


def test_without_the_setting_gunicorn_uses_the_var_folder(monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    folder = gunicorn_conf.metrics_folder_prepare()
    assert folder == VAR_DIR / "prometheus" and folder.is_dir()
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(folder)
