"""A light start: `recount --help` imports no command module and no heavy library; the listing it shows
is the commands' own; Spark is an extra, and asking for it without pyspark says what to install.

Startup time itself is measured by benchmarks/bench_startup.py (figures, not a timed test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli.app import COMMAND_MODULES, COMMANDS, command, load_commands, run

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("engine", "recorder", "pyarrow", "duckdb", "textual", "pyspark", "numpy", "cli.commands")


def test_top_level_help_imports_no_command_module_and_no_heavy_library():
    probe = (
        "import sys\n"
        "from cli.app import run\n"
        "code = run(['--help'])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m.startswith('cli.commands'))\n"
        "print(code, heavy, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stderr.strip() == "0 []"
    for name, _ in COMMANDS.values():
        assert f" {name} " in result.stdout


def test_the_listing_is_each_commands_own_name_and_first_help_line():
    for module in COMMAND_MODULES:
        real = load_commands(module)
        name, help_line = COMMANDS[module]
        assert list(real) == [name], module
        assert real[name].help.strip().splitlines()[0] == help_line, module


def test_a_command_runs_and_shows_its_help_when_only_listed(capsys):
    assert run(["versions", "--json"]) == 0
    assert capsys.readouterr().out.startswith("{")
    assert run(["replay", "--help"]) == 0
    assert "recount replay" in capsys.readouterr().out
    assert sorted(command().commands) == sorted(name for name, _ in COMMANDS.values())


def test_engine_spark_without_pyspark_says_the_one_pip_command(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # as if not installed
    capsys.readouterr()
    assert run(["convert", str(ROOT / "samples"), "--engine", "spark", "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "python -m pip install 'aeron-recount[spark]'" in err


def test_out_dir_without_pyspark_converts_locally_and_says_so(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    capsys.readouterr()
    assert run(["convert", str(ROOT / "samples"), "--out-dir", str(tmp_path / "out"), "--json"]) == 0
    captured = capsys.readouterr()
    assert "--engine local" in captured.err
    assert (tmp_path / "out" / "leader-failover.arrow").exists()


@pytest.mark.parametrize("extra", ["spark", "test"])
def test_pyspark_is_in_the_spark_and_test_extras_only(extra):
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("pyspark") for d in project["dependencies"])
    assert any(d.startswith("pyspark") for d in project["optional-dependencies"][extra])
