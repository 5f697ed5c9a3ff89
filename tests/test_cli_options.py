"""Option choices are enums (`cli.options`): --help lists them, and Typer refuses anything else before a
command runs, as one line with exit status 2, in the words the commands have always used."""

from __future__ import annotations

import pytest

from cli.app import run
from cli.options import Engine, ExportFormat, GroupBy, Mode, Nomination
from engine.replay import NOMINATION_SOURCES
from recorder.diff import MODES
from tests.conftest import ROOT

SAMPLE = str(ROOT / "samples" / "clean-start" / "incident.arrow")


def test_the_choices_are_the_library_s_own():
    assert sorted(Mode) == sorted(MODES)
    assert sorted(Nomination) == sorted(NOMINATION_SOURCES)


@pytest.mark.parametrize(
    ("argv", "option", "choices"),
    [
        (["replay", SAMPLE, "--mode", "nodes"], "--mode", Mode),
        (["replay", SAMPLE, "--nomination", "random"], "--nomination", Nomination),
        (["diff", SAMPLE, "--model", "1.41.0", "--model", "1.47.3", "--mode", "both"], "--mode", Mode),
        (["bisect", SAMPLE, "--good", "1.47.3", "--bad", "1.41.0", "--check", "leader_elected", "--mode=x"], "--mode", Mode),
        (["export", SAMPLE, "-o", "unused.json", "--format", "otlp"], "--format", ExportFormat),
        (["convert", SAMPLE, "--out-dir", "unused", "--engine", "dask"], "--engine", Engine),
        (["convert", SAMPLE, "--out-dir", "unused", "--group-by", "host"], "--group-by", GroupBy),
    ],
)
def test_a_value_that_is_not_a_choice_is_refused_before_the_command_runs(argv, option, choices, capsys, tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(argv) == 2
    err = capsys.readouterr().err
    command = argv[0]
    expected = f"recount {command}: {option} must be one of {', '.join(choices)}, got '{argv[-1].split('=')[-1]}'"
    assert err == f"{expected} (see 'recount {command} --help')\n"
    assert list(tmp_path.iterdir()) == []  # nothing was written


@pytest.mark.parametrize(
    ("command", "option", "choices"),
    [
        ("replay", "--mode", Mode),
        ("replay", "--nomination", Nomination),
        ("diff", "--mode", Mode),
        ("export", "--format", ExportFormat),
        ("convert", "--engine", Engine),
        ("convert", "--group-by", GroupBy),
    ],
)
def test_help_lists_the_choices(command, option, choices, capsys):
    assert run([command, "--help"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if option in line.split())
    assert "|".join(choices) in line


def test_the_command_line_uses_typers_public_api_only():
    """No private Typer module, no click reached through Typer, no probing for either: `typer.X` names
    only what `typer` itself exports, and `typer.main.get_command` (Typer's documented way to the
    click objects) only where `cli.app` gives tests and tools the command tree.  The one exception is
    `cli.deferred_coercion`, which reaches into Typer's coercion to keep pydantic out of a command's
    start, falls back to Typer's own where the internals differ, and is checked against it
    (tests/test_startup.py)."""
    import ast

    import typer

    public = {name for name in vars(typer) if not name.startswith("_")} - {
        "core", "main", "models", "params", "utils", "completion", "colors", "rich_utils", "testing", "cli"}
    public |= {"colors"}  # a documented module of constants
    found = []
    for path in sorted((ROOT / "cli").rglob("*.py")):
        if path == ROOT / "cli" / "deferred_coercion.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{path.name}: import {n}" for n in names if n.split(".")[0] == "click" or n.startswith("typer.")]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "typer":
                if node.attr not in public and not (path.name == "app.py" and node.attr == "main"):
                    found.append(f"{path.name}: typer.{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(("typer.", "click")):
                found.append(f"{path.name}: {node.value!r}")  # a module named in a string, to import
    assert found == []
