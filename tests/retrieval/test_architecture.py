"""The shape the code promises its readers (docs/architecture.md): the lookup reads as its list of
stages, the stage list in the docs is the one in the code, and no module or stage grows past what
a reader takes in at once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from retrieval.lookup.clock import StageClock
from tests.support.lookup_stages import LOOKUP_STAGES

ROOT = Path(__file__).resolve().parents[2]
LOOKUP = ROOT / "retrieval" / "lookup"
STAGE_MODULES = (
    "memory",
    "filtering",
    "candidates",
    "searchable",
    "evidence",
    "selection",
    "marking",
    "answer",
    "record",
)


def _function(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def _stage_calls() -> list[str]:
    """The stage names ``lookup_run`` times, in order."""
    body = _function(LOOKUP / "pipeline.py", "lookup_run")
    return [
        call.args[0].value
        for call in ast.walk(body)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "run"
        and call.args
        and isinstance(call.args[0], ast.Constant)
    ]


def test_lookup_run_is_the_list_of_stages_under_40_lines():
    assert _lines(_function(LOOKUP / "pipeline.py", "lookup_run")) < 40
    assert _stage_calls() == list(LOOKUP_STAGES)


def test_the_docs_stage_table_names_the_code_s_stages_in_order():
    table = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\| \d+ \| (.+?) \| `([a-z_]+)\.py`", table, flags=re.M)
    names = [
        name.replace("candidates: ", "candidates:").replace("searchable documents", "searchable")
        for name, _ in documented
    ]
    assert names[:-1] == [n.replace("candidates:l", "candidates:L") for n in _stage_calls()]
    assert names[-1] == "record"
    for _, module in documented:
        assert (LOOKUP / f"{module}.py").exists(), module


@pytest.mark.parametrize("module", STAGE_MODULES)
def test_no_stage_function_is_over_60_lines(module):
    tree = ast.parse((LOOKUP / f"{module}.py").read_text(encoding="utf-8"))
    long = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _lines(n) > 60]
    assert long == []


def test_no_retrieval_module_is_over_300_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in (ROOT / "retrieval").rglob("*.py")
        if "migrations" not in path.parts and (n := len(path.read_text(encoding="utf-8").splitlines())) > 300
    }
    assert long == {}


def test_the_clock_adds_up_a_stage_run_twice_and_times_a_stage_that_raises():
    clock = StageClock()
    assert clock.run("a", lambda x: x + 1, 1) == 2
    clock.run("a", lambda: None)
    with pytest.raises(ZeroDivisionError):
        clock.run("b", lambda: 1 / 0)
    assert set(clock.ms) == {"a", "b"}
    assert clock.get("a", "b") == round(clock.ms["a"] + clock.ms["b"], 2)
    assert clock.get("never") == 0.0
