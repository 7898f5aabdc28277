"""Every command the README and docs/*.md show runs as written.

The shell blocks (```bash) are read line by line (continuations joined): each line must parse as
the shell would split it (shlex), start with a program that exists here (`.venv/bin/...`, a
Makefile target, curl...), never a bare `python` (no venv on PATH: "No module named 'django'"),
and a `manage.py <command> --flag` or `bench/<script>.py --flag` must name a real command and its
real flags (the commands' own argparse parsers; the scripts' --help, which is run). Inline spans
that show a `manage.py` command are held to the same check.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
# Programs the docs may call that are not ours: they are on any machine that runs the service.
SYSTEM_PROGRAMS = {"curl", "git", "cd", "export", "tail", "cat", "ls", "npx"}
VENV_BIN = Path(sys.executable).parent
BARE_PYTHON = re.compile(r"(?<![\w./-])python3? (manage\.py|bench/|scripts/)")
INLINE_MANAGE = re.compile(r"`((?:\.venv/bin/python )?manage\.py [^`]+)`")


@dataclass(frozen=True)
class DocLine:
    where: str
    text: str


def _complete(text: str) -> bool:
    """Whether a command's text is whole: no quote left open (a JSON body may span lines)."""
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def _shell_lines(path: Path) -> list[DocLine]:
    """The commands of the shell blocks, continuation and multi-line quotes joined."""
    lines: list[DocLine] = []
    lang = None
    pending, start = "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```") and not pending:
            lang = None if lang is not None else stripped[3:].strip() or ""
            continue
        if lang not in SHELL_LANGS or (not stripped and not pending):
            continue
        if not pending:
            start = number
        pending = f"{pending}\n{line}" if pending else stripped
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        if not _complete(pending) and not stripped.startswith("```"):
            continue
        lines.append(DocLine(f"{path.name}:{start}", pending))
        pending = ""
    return lines


def _inline_commands(path: Path) -> list[DocLine]:
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for match in INLINE_MANAGE.finditer(line):
            found.append(DocLine(f"{path.name}:{number}", match.group(1)))
    return found


ALL_SHELL_LINES = [line for path in DOCS for line in _shell_lines(path)]
ALL_INLINE = [line for path in DOCS for line in _inline_commands(path)]


def _substitutions(text: str) -> tuple[str, list[str]]:
    """``text`` with each ``$(...)`` replaced by SUBSTITUTED, and the commands they held.

    Parentheses inside quotes (a ``python -c`` one-liner) do not close a substitution.
    """
    outer, inner = [], []
    i = 0
    while i < len(text):
        if text.startswith("$(", i):
            depth, j, quote = 1, i + 2, None
            while j < len(text) and depth:
                char = text[j]
                if quote:
                    quote = None if char == quote else quote
                elif char in "'\"":
                    quote = char
                elif char == "(":
                    depth += 1
                elif char == ")":
                    depth -= 1
                j += 1
            inner.append(text[i + 2 : j - 1])
            outer.append("SUBSTITUTED")
            i = j
        else:
            outer.append(text[i])
            i += 1
    return "".join(outer), inner


def _segments(text: str) -> list[list[str]]:
    """The simple commands of a line: `$(...)` substitutions, then the parts between | && ;."""
    outer, inner = _substitutions(text)
    segments: list[list[str]] = []
    for part in [outer, *inner]:
        lexer = shlex.shlex(part, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        for token in lexer:
            if token and set(token) <= set("|&;"):
                segments.append(current)
                current = []
            else:
                current.append(token)
        segments.append(current)
    return [s for s in segments if s]


@cache
def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([a-zA-Z][\w-]*):", text, re.M))


@cache
def _manage_parser(name: str):
    from django.core.management import get_commands, load_command_class

    commands = get_commands()
    if name not in commands:
        return None
    return load_command_class(commands[name], name).create_parser("manage.py", name)


@cache
def _script_help(script: str) -> str:
    # Running the script's --help is safe (argparse exits before any work) and proves it starts.
    done = subprocess.run(
        [sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{script} --help failed: {done.stderr[-500:]}"
    return done.stdout


def _flags(args: list[str]) -> list[str]:
    """The --options a documented line passes (optional ones shown in [brackets] included)."""
    flags = []
    for arg in args:
        arg = arg.strip("[]")
        if arg.startswith("--"):
            flags.append(arg.split("=", 1)[0])
    return flags


def _problems_of_python(args: list[str]) -> list[str]:
    if not args:
        return ["python with no arguments"]
    head, rest = args[0], args[1:]
    if head == "-c":
        try:
            ast.parse(rest[0])
        except SyntaxError as exc:
            return [f"python -c code does not parse: {exc}"]
        return []
    if head == "-m":
        return [] if importlib.util.find_spec(rest[0]) else [f"no module {rest[0]}"]
    if head == "manage.py":
        if not rest or rest[0].isupper():
            return []  # `manage.py` alone, or a placeholder (COMMAND) in prose
        parser = _manage_parser(rest[0])
        if parser is None:
            return [f"manage.py has no command {rest[0]!r}"]
        known = set(parser._option_string_actions)
        return [f"manage.py {rest[0]} has no option {f}" for f in _flags(rest[1:]) if f not in known]
    if head.endswith(".py"):
        if not (REPO / head).is_file():
            return [f"no file {head}"]
        helptext = _script_help(head)
        return [f"{head} has no option {f}" for f in _flags(rest) if f not in helptext]
    return [f"python {head}: not a documented form"]


def _problems(segment: list[str]) -> list[str]:
    words = list(segment)
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words.pop(0)  # VAR=value before the program
    if not words:
        return []
    program, args = words[0], words[1:]
    if program in {"python", "python3", "pip"}:
        return [f"bare {program!r}: use .venv/bin/{program} (no venv is on PATH)"]
    if program.startswith(".venv/bin/"):
        name = program.removeprefix(".venv/bin/")
        if not (VENV_BIN / name).exists():
            return [f"{program} is not installed by `make install`"]
        return _problems_of_python(args) if name == "python" else []
    if program == "make":
        targets = [a for a in args if not a.startswith("-") and "=" not in a]
        return [f"no make target {t!r}" for t in targets if t not in _make_targets()]
    if program in SYSTEM_PROGRAMS:
        return []
    return [f"unknown program {program!r}"]


def test_the_docs_show_shell_commands_at_all():
    assert len(ALL_SHELL_LINES) > 30
    assert any("manage.py" in line.text for line in ALL_SHELL_LINES)


@pytest.mark.parametrize("line", ALL_SHELL_LINES, ids=lambda line: line.where)
def test_every_documented_shell_line_runs_as_written(line):
    try:
        segments = _segments(line.text)
    except ValueError as exc:
        pytest.fail(f"{line.where}: does not parse as a shell line ({exc}): {line.text}")
    problems = [p for segment in segments for p in _problems(segment)]
    assert not problems, f"{line.where}: {line.text}\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("line", ALL_INLINE, ids=lambda line: line.where)
def test_every_inline_manage_command_names_a_real_command_and_flags(line):
    args = shlex.split(line.text.replace("<", "").replace(">", ""))
    if args[0] == ".venv/bin/python":
        args = args[1:]
    problems = _problems_of_python(args)
    assert not problems, f"{line.where}: {line.text}\n  " + "\n  ".join(problems)


def test_no_doc_tells_to_run_a_bare_python():
    bare = [
        f"{path.name}:{number}: {line.strip()}"
        for path in DOCS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BARE_PYTHON.search(line)
    ]
    assert not bare, "\n".join(bare)


def test_the_checker_catches_what_a_newcomer_hit():
    # The failures the docs had: a bare python, a command that does not exist, a flag it lacks.
    assert _problems(["python", "manage.py", "lookup", "x"])
    assert _problems([".venv/bin/python", "manage.py", "no_such_command"])
    assert _problems([".venv/bin/python", "manage.py", "check_index", "--no-such-flag"])
    assert _problems([".venv/bin/python", "bench/no_such.py"])
    assert _problems(["make", "no-such-target"])
    assert not _problems([".venv/bin/python", "manage.py", "check_index", "[--repair]"])
    assert _segments("A=$(.venv/bin/python manage.py issue_tool_token x | tail -1)") == [
        ["A=SUBSTITUTED"],
        [".venv/bin/python", "manage.py", "issue_tool_token", "x"],
        ["tail", "-1"],
    ]
