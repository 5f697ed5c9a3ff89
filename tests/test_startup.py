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


def _coerced(runtime, value, param, ctx):
    """What a parameter's coercion gives for ``value``: ("value", the value) or ("error", its message)."""
    import typer

    try:
        return "value", runtime.coerce(value, param=param, ctx=ctx)
    except typer.BadParameter as error:
        return "error", error.format_message()


def test_deferred_coercion_gives_every_parameter_of_every_command_what_typers_own_gives():
    """`cli.deferred_coercion` (values Typer's pydantic adapters would give back unchanged are given
    back without them, a duration as its parser reads it) against Typer's own, for every parameter of every
    command: None, its default, strings, lists of strings, numbers in and out of range, enum members and
    their names, durations good and bad, nonsense."""
    import enum

    import typer
    from typer._coercion import build_runtime_param

    from cli.deferred_coercion import deferred_class

    _known_typer()
    deferred = deferred_class()
    assert deferred is not None, "this Typer's internals are not as cli.app expects: nothing is deferred"
    tree = command()
    compared = parsed = 0
    for name, sub in sorted(tree.commands.items()):
        ctx = typer.Context(sub, info_name=name)
        for param in sub.get_params(ctx):
            descriptor = param.type_descriptor
            if descriptor.file_annotation is not None:
                continue
            values = [None, param.default, "x", "", "12", "-3", "a,b", ("x", "y"), ["p=1"], (), 0, 7, -1, True, False,
                      1.5, b"bytes"]
            if descriptor.parameter_info.parser is not None:  # a duration: its spellings, good and bad
                values += ["2500ms", "1.5s", "3us", "10ns", "2m", "1h", "-5ms", "5 ms", "ms", "1e3", "9" * 30]
                parsed += 1
            annotation = descriptor.annotation
            if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
                values += [*annotation, *(m.value for m in annotation), *(m.value.upper() for m in annotation)]
            for value in values:
                want = _coerced(build_runtime_param(descriptor), value, param, ctx)
                got = _coerced(deferred(annotation=annotation, parameter_info=descriptor.parameter_info), value,
                               param, ctx)
                assert got == want and type(got[1]) is type(want[1]), (name, param.name, value)
                compared += 1
    assert compared > 500 and parsed >= 6  # every duration option (--until, --tolerance, ...) compared too


def _known_typer() -> None:
    import typer

    from cli.deferred_coercion import KNOWN_TYPER

    if not typer.__version__.startswith(KNOWN_TYPER):
        pytest.skip(f"Typer {typer.__version__} is not a release cli.deferred_coercion knows {KNOWN_TYPER}: it "
                    "defers nothing (test_an_unknown_typer_coerces_every_value_itself); add it once this test passes")


def test_an_unknown_typer_coerces_every_value_itself(monkeypatch, tmp_path):
    """With a Typer release the module was not written against, nothing is deferred, and a command still
    parses its values (Typer's own coercion, pydantic and all)."""
    import typer

    from cli import deferred_coercion

    monkeypatch.setattr(typer, "__version__", "0.99.0")
    assert deferred_coercion.deferred_class() is None
    tree = command()
    sub = tree.commands["convert"]
    params = sub.get_params(typer.Context(sub, info_name="convert"))
    deferred_coercion.defer(params)
    assert not any(type(p.__dict__.get("_runtime_param")).__name__ == "Deferred" for p in params)
    assert run(["convert", str(ROOT / "samples" / "leader-failover"), "-o", str(tmp_path / "out.arrow"), "--json"]) == 0


@pytest.mark.parametrize("arguments", [
    ["convert", str(ROOT / "samples" / "leader-failover"), "-o", "OUT", "--format", "auto", "--config",
     "aeron.cluster.election.timeout=1s", "--json"],
    ["replay", str(ROOT / "samples" / "split-vote" / "incident.arrow"), "--tolerance", "60ms", "--until",
     "1772366402000000000", "--json"],
], ids=["convert", "replay-with-durations"])
def test_a_command_parses_its_command_line_without_importing_pydantic(tmp_path, arguments):
    _known_typer()
    arguments = [str(tmp_path / "out.arrow") if one == "OUT" else one for one in arguments]
    probe = (
        "import sys, io, contextlib\n"
        "from cli.app import run\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    code = run({arguments!r})\n"
        "print(code, 'pydantic' in sys.modules, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert result.stderr.strip().splitlines()[-1] == "0 False", result.stderr


def test_convert_and_replay_end_without_the_interpreters_teardown_with_output_whole_and_exit_status(tmp_path):
    """`recount convert` and `recount replay` (`cli.app.QUICK_EXIT`) leave through `os._exit` once its output is flushed and
    its exit handlers have run: the JSON summary is whole, an exit handler of the command's still runs,
    and a failure's exit status and message are the same as ever."""
    out = tmp_path / "incident.arrow"
    sample = ROOT / "samples" / "leader-failover"
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('handler ran', file=sys.stderr))\n"
        "class Torn:\n"
        "    def __del__(self):\n"
        "        print('torn down', file=sys.stderr)\n"
        "kept = Torn()\n"
        "from cli.app import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, "convert", str(sample), "-o", str(out), "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    import json

    assert json.loads(done.stdout)["out"] == str(out)
    assert done.stderr.strip().splitlines()[-1] == "handler ran"
    assert "torn down" not in done.stderr  # no teardown: the objects still alive are not freed one by one
    failed = subprocess.run([sys.executable, "-c", probe, "convert", str(sample), "-o", str(out)],
                            capture_output=True, text=True, cwd=ROOT)
    assert failed.returncode == 2
    assert failed.stderr.splitlines()[0] == f"recount: {out}: exists (use --force to overwrite it)"
    replayed = subprocess.run([sys.executable, "-c", probe, "replay", str(sample / "incident.arrow"), "--json"],
                              capture_output=True, text=True, cwd=ROOT)
    assert replayed.returncode == 0, replayed.stderr
    *trace, summary = replayed.stdout.splitlines()
    assert trace and json.loads(summary)["kind"] == "summary"  # the whole trace, its summary last
    assert replayed.stderr.strip().splitlines()[-1] == "handler ran" and "torn down" not in replayed.stderr
    listed = subprocess.run([sys.executable, "-c", probe, "versions", "--json"], capture_output=True, text=True,
                            cwd=ROOT)
    assert listed.returncode == 0 and "torn down" in listed.stderr  # other commands exit as Python does


def test_a_replay_of_a_replay_file_as_json_imports_neither_pyarrow_compute_nor_the_text_timeline():
    """`recount replay FILE --json` streams the file through Arrow's kernels (`formats.arrow_compute`), never
    importing `pyarrow.compute`'s wrappers (25 ms), nor rich (its consoles are made when first used,
    `cli.output`) or its tables for a timeline it does not print, nor the cluster replay it does not run; the
    text timeline still renders, and the trace is the whole one."""
    probe = (
        "import sys, io, contextlib\n"
        "from cli.app import run\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n    code = run(sys.argv[1:])\n"
        "lines = out.getvalue().splitlines()\n"
        "loaded = [m for m in ('pyarrow.compute', 'cli.render_replay', 'engine.cluster_replay', 'rich.console')\n"
        "          if m in sys.modules]\n"
        "print(code, len(lines), loaded, file=sys.stderr)\n"
    )
    sample = str(ROOT / "samples" / "leader-failover" / "incident.arrow")
    done = subprocess.run([sys.executable, "-c", probe, "replay", sample, "--json"], capture_output=True, text=True,
                          cwd=ROOT)
    code, lines, loaded = done.stderr.strip().splitlines()[-1].split(" ", 2)
    assert (code, loaded) == ("0", "[]"), done.stderr
    assert int(lines) > 100
    text = subprocess.run([sys.executable, "-c", probe, "replay", sample], capture_output=True, text=True, cwd=ROOT)
    assert "'cli.render_replay'" in text.stderr.strip().splitlines()[-1], text.stderr
    assert "'rich.console'" in text.stderr.strip().splitlines()[-1], text.stderr


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc/self/task (Linux)")
def test_convert_loads_numpy_without_blas_worker_threads_and_leaves_the_environment_as_it_was():
    probe = (
        "import os, sys\n"
        "from cli.app import without_blas_threads\n"
        "without_blas_threads()\n"
        "import numpy\n"
        "print(len(os.listdir('/proc/self/task')), 'OPENBLAS_NUM_THREADS' in os.environ)\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    assert done.stdout.split() == ["1", "False"]
    chosen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True,
                            env={**env, "OPENBLAS_NUM_THREADS": "2"})
    assert chosen.stdout.split()[1] == "True"  # the user's choice is the user's, and left in place
