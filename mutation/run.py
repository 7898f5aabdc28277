"""Mutation testing of the decision code with cosmic-ray: ``make mutate`` (or
``python -m mutation.run [TARGET ...] [--report-only]``).

For each target of mutation/targets.toml: cosmic-ray lists every mutant of its files, the ones
outside the target's ``functions`` and those of the skipped operators are marked skipped, the
target's tests are run once unmutated (they must pass; the per-mutant timeout is derived from that
run), then each mutant is written into the file, the tests are run, and the file is put back.
Results land in var/mutation/<target>.sqlite (a session that is interrupted resumes where it
stopped). The report lists every surviving mutant that mutation/equivalent.toml does not explain,
with its diff, and the score; the exit status is 1 when such a survivor is left.

Mutants are tried one at a time, niced, with one BLAS/torch thread: the run is slow but leaves the
machine usable.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
OUT = REPO / "var" / "mutation"

# Operators not tried. On this code (strings, collections, Django queries) replacing an arithmetic
# operator by a bitwise, shift, power or modulo one fails with a TypeError at once, as the
# add/sub/mul/div replacements already show: each would cost a test run and teach nothing.
SKIPPED_OPERATORS = re.compile(
    r"core/ReplaceBinaryOperator_\w+_(BitOr|BitAnd|BitXor|LShift|RShift|Pow|Mod|FloorDiv)$"
)
# Also not tried: mutating the ``X | Y`` of isinstance() type unions (always a TypeError).
SKIPPED_FROM_BITOR = re.compile(r"core/ReplaceBinaryOperator_BitOr_\w+$")

PYTEST = [
    "-m",
    "pytest",
    "-x",
    "-q",
    "-p",
    "no:cacheprovider",
    # Only the plugins these tests use: hypothesis, schemathesis and faker cost seconds per run.
    "-p",
    "pytest_django.plugin",
    "-p",
    "pytest_timeout",
]


@dataclass(frozen=True)
class Target:
    name: str
    paths: list[str]
    tests: list[str]
    functions: list[str] | None = None
    services: bool = False


def load_targets(path: Path = HERE / "targets.toml") -> dict[str, Target]:
    data = tomllib.loads(path.read_text())
    return {
        name: Target(
            name=name,
            paths=t["paths"],
            tests=t["tests"],
            functions=t.get("functions"),
            services=t.get("services", False),
        )
        for name, t in data.items()
    }


def load_equivalents() -> list[dict]:
    return tomllib.loads((HERE / "equivalent.toml").read_text()).get("equivalent", [])


def function_lines(path: Path, names: list[str]) -> set[int]:
    """The line numbers of the named top-level functions (decorators included)."""
    tree = ast.parse(path.read_text())
    lines: set[int] = set()
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines.update(range(start, node.end_lineno + 1))
            found.add(node.name)
    missing = set(names) - found
    if missing:
        raise SystemExit(
            f"{path}: no top-level function {', '.join(sorted(missing))} (mutation/targets.toml)"
        )
    return lines


def test_env(target: Target) -> dict[str, str]:
    env = dict(os.environ)
    if not target.services:
        # The embedded mode: no MariaDB, Redis or milvus-lite server to start for every mutant.
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
    elif not (env.get("DATABASE_URL", "").startswith("mysql") and env.get("REDIS_URL")):
        raise SystemExit(
            f"{target.name}: its tests need the service-backed mode: set DATABASE_URL=mysql://... and REDIS_URL"
        )
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCH_NUM_THREADS"):
        env[var] = "1"
    return env


def test_command(target: Target) -> str:
    # The embedded mode keeps its SQLite test database between runs; on MariaDB each run gets a
    # database of its own (config/settings_test.py: test_agentkb_<pid>), which --reuse-db would
    # leave behind, one per mutant.
    reuse = [] if target.services else ["--reuse-db"]
    return shlex.join([sys.executable, *PYTEST, *reuse, *target.tests])


def config_text(target: Target, timeout: float) -> str:
    import toml  # cosmic-ray's own dependency, to write the config it reads back

    return toml.dumps(
        {
            "cosmic-ray": {
                "module-path": target.paths,
                "timeout": timeout,
                "excluded-modules": [],
                "test-command": test_command(target),
                "distributor": {"name": "local"},
            }
        }
    )


def skip_filtered(session: Path, target: Target) -> int:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    allowed: dict[Path, set[int]] = {}
    skipped = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.pending_work_items:
            mutation = item.mutations[0]
            path = Path(mutation.module_path)
            if SKIPPED_OPERATORS.match(mutation.operator_name) or SKIPPED_FROM_BITOR.match(
                mutation.operator_name
            ):
                skipped.append(item.job_id)
                continue
            if target.functions:
                if path not in allowed:
                    allowed[path] = function_lines(REPO / path, target.functions)
                if mutation.start_pos[0] not in allowed[path]:
                    skipped.append(item.job_id)
        if skipped:
            db.set_multiple_results(skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
    return len(skipped)


def diff_lines(diff: str) -> tuple[str, str]:
    """(removed, added) source lines of a one-line mutant's diff, stripped."""
    removed = [
        line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")
    ]
    added = [
        line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    return " / ".join(removed), " / ".join(added)


def explained(equivalents: list[dict], path: str, operator: str, removed: str, added: str) -> dict | None:
    for entry in equivalents:
        if (
            entry["file"] == path
            and entry["operator"] == operator
            and entry["line"] == removed
            and entry["mutant"] == added
        ):
            return entry
    return None


@dataclass
class Score:
    target: str
    mutants: int = 0
    skipped: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: int = 0
    pending: int = 0

    @property
    def score(self) -> float:
        tried = self.killed + self.survivors
        return 100.0 * self.killed / tried if tried else 100.0


def report(target: Target) -> Score:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    session = OUT / f"{target.name}.sqlite"
    equivalents = load_equivalents()
    score = Score(target.name)
    lines = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        score.mutants = db.num_work_items
        score.pending = sum(1 for _ in db.pending_work_items)
        for item, result in db.completed_work_items:
            mutation = item.mutations[0]
            if result.worker_outcome in (WorkerOutcome.SKIPPED, WorkerOutcome.NO_TEST):
                score.skipped += 1
                continue
            if result.test_outcome != TestOutcome.SURVIVED:
                score.killed += 1
                continue
            removed, added = diff_lines(result.diff or "")
            entry = explained(equivalents, str(mutation.module_path), mutation.operator_name, removed, added)
            if entry is not None:
                score.equivalent += 1
                continue
            score.survivors += 1
            lines.append(
                f"SURVIVED {mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name} "
                f"(in {mutation.definition_name})\n  - {removed}\n  + {added}"
            )
    text = "\n".join(lines)
    (OUT / f"{target.name}-survivors.txt").write_text(text + "\n")
    if text:
        print(text)
    return score


def has_work_items(session: Path) -> bool:
    if not session.exists():
        return False
    with sqlite3.connect(session) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return "work_items" in tables and db.execute("SELECT COUNT(*) FROM work_items").fetchone()[0] > 0


def forget_survivors(session: Path, *, drop_pending: bool = False) -> None:
    """Keep a copy of the session, then drop its survivors' results so that they run again.

    ``drop_pending``: also drop the mutants an interrupted run never tried, so that the retry
    covers the same mutants as the run before it (and takes minutes, not hours)."""
    before = session.with_suffix(".before.sqlite")
    if not before.exists():
        shutil.copyfile(session, before)
    with sqlite3.connect(session) as db:
        if drop_pending:
            # Never tried in the first run (a survivor dropped by an earlier retry is pending too).
            db.execute("ATTACH DATABASE ? AS before", (str(before),))
            for table in ("mutation_specs", "work_items"):
                db.execute(
                    f"DELETE FROM {table} WHERE job_id NOT IN (SELECT job_id FROM before.work_results)"
                )
        db.execute("DELETE FROM work_results WHERE test_outcome IN ('SURVIVED', 'survived')")


def run(target: Target) -> None:
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", *target.paths], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    if dirty:
        raise SystemExit(
            f"{target.name}: commit or stash changes to {', '.join(target.paths)} first:\n{dirty}"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    session = OUT / f"{target.name}.sqlite"
    config = OUT / f"{target.name}.toml"

    print(f"== {target.name}: baseline run of {' '.join(target.tests)}", flush=True)
    started = time.monotonic()
    baseline = subprocess.run(shlex.split(test_command(target)), cwd=REPO, env=test_env(target))
    elapsed = time.monotonic() - started
    if baseline.returncode != 0:
        raise SystemExit(f"{target.name}: the tests fail without any mutant; fix them first")
    # A mutant that makes the tests hang (an endless loop) counts as killed once this passes.
    timeout = round(max(30.0, 3 * elapsed + 15), 1)
    config.write_text(config_text(target, timeout))

    if not has_work_items(session):
        subprocess.run(
            [str(Path(sys.executable).parent / "cosmic-ray"), "init", str(config), str(session)],
            cwd=REPO,
            check=True,
            env=test_env(target),
        )
        skipped = skip_filtered(session, target)
        print(f"== {target.name}: {skipped} mutants skipped (other functions, skipped operators)", flush=True)
    print(f"== {target.name}: mutants run one at a time, timeout {timeout} s each", flush=True)
    subprocess.run(
        [str(Path(sys.executable).parent / "cosmic-ray"), "exec", str(config), str(session)],
        cwd=REPO,
        check=True,
        env=test_env(target),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--targets-file", type=Path, default=HERE / "targets.toml", help="default: %(default)s"
    )
    parser.add_argument("targets", nargs="*", help="default: every target")
    parser.add_argument("--report-only", action="store_true", help="print the report of the last run")
    parser.add_argument("--fresh", action="store_true", help="forget the previous session and start over")
    parser.add_argument(
        "--retry-survivors",
        action="store_true",
        help="run the last session's survivors again (after adding tests); the session before is kept "
        "as <target>.before.sqlite",
    )
    parser.add_argument(
        "--drop-pending",
        action="store_true",
        help="with --retry-survivors: forget the mutants an interrupted run never tried",
    )
    args = parser.parse_args(argv)
    targets = load_targets(args.targets_file)
    unknown = set(args.targets) - set(targets)
    if unknown:
        parser.error(f"unknown target {', '.join(sorted(unknown))}; choose from {', '.join(targets)}")
    chosen = [targets[name] for name in (args.targets or targets)]
    if not args.report_only:
        os.nice(10)
        for target in chosen:
            session = OUT / f"{target.name}.sqlite"
            if args.fresh:
                session.unlink(missing_ok=True)
            elif args.retry_survivors and session.exists():
                forget_survivors(session, drop_pending=args.drop_pending)
            run(target)
    scores = []
    for target in chosen:
        if not (OUT / f"{target.name}.sqlite").exists():
            raise SystemExit(f"{target.name}: no session yet; run without --report-only")
        scores.append(report(target))
    print(
        f"\n{'target':<15} {'mutants':>8} {'skipped':>8} {'killed':>7} {'equiv.':>7} {'survived':>9} {'pending':>8}  score"
    )
    for s in scores:
        print(
            f"{s.target:<15} {s.mutants:>8} {s.skipped:>8} {s.killed:>7} {s.equivalent:>7} {s.survivors:>9} "
            f"{s.pending:>8}  {s.score:.1f}%"
        )
    return 1 if any(s.survivors or s.pending for s in scores) else 0


if __name__ == "__main__":
    sys.exit(main())
