"""The command line's promises (README, contract §3), checked for every command at once.

`COMMANDS` says, for each command, how to give it an input file, a run that prints data, and where
it writes.  The tests walk the real Typer app: a command that is added without a row here, that
loses its --help example or --json, lets a traceback or several lines out on bad input, or
overwrites a file without --force fails CI.  Most run in-process through `cli.app.run`; a few run
`python -m cli` in a real subprocess.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cli.app import command, run

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
CLEAN_START = SAMPLES / "clean-start"
FAILOVER_DIR = SAMPLES / "leader-failover" / "node1" / "cluster"

#: A scenario that simulates in a fraction of a second.
TINY_SCENARIO = 'name = "tiny"\nseed = 3\nduration = "300ms"\n'

@dataclass(frozen=True)
class Command:
    """How the contract tests drive one command."""

    #: The command with this input file (or directory) in its input's place; None: it reads no file.
    given: Callable[[str, Path], list[str]] | None
    #: The suffix a user's input for it would have (bad inputs are named with it).
    suffix: str = ""
    #: A real file of another kind that must be refused.
    wrong_kind: Path | None = None
    #: A run that prints data; `--json` is added.  Gets the test's tmp_path and the pytest request.
    prints: Callable[[Path, pytest.FixtureRequest], list[str]] | None = None
    #: "document" (one JSON value) or "lines" (JSON Lines) on stdout with --json.
    json: str = "document"
    #: Bad-input kinds this command legitimately accepts (with why).
    accepts: dict[str, str] = field(default_factory=dict)
    #: Bad-input kinds known to be mishandled by code outside this test's reach: strict xfail.
    known_gaps: dict[str, str] = field(default_factory=dict)
    #: The command writing to `target` (a path that exists already); None: it writes nothing.
    writes: Callable[[Path, Path], list[str]] | None = None


def _mark_file(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    # No sample has a mark file (the simulator writes none); the real capture's is the one to read.
    return ["inspect", "mark-file", str(request.getfixturevalue("capture") / "node0" / "cluster-mark.dat")]


def _archive_catalog(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    # The simulator writes no archive; a real member's archive dir, as captured, is the one to read.
    member = request.getfixturevalue("reference") / "aeron-1.47.3-capture" / "f_follower_kill_rejoin_catchup" / "node0"
    return ["inspect", "archive-catalog", str(member / "archive.tar.gz")]


def _simulate(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    scenario = tmp / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    return ["simulate", str(scenario), "-o", str(tmp / "incident")]


def _tiny_scenario(tmp: Path) -> str:
    scenario = tmp / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    return str(scenario)


def _record(out: Path) -> list[str]:
    # Free ports on loopback, nobody sending: the proxy starts, records nothing and stops.
    members = "0,127.0.0.1:29002,127.0.0.1:29003,127.0.0.1:29004,127.0.0.1:29005,127.0.0.1:29001"
    return ["record", "--members", members, "--out", str(out), "--duration", "0.05"]


SAMPLE = CLEAN_START / "incident.arrow"
BISECT_SAMPLE = SAMPLES / "graceful-close-across-versions" / "incident.arrow"

COMMANDS: dict[tuple[str, ...], Command] = {
    ("inspect", "recording-log"): Command(
        given=lambda f, tmp: ["inspect", "recording-log", f],
        suffix=".log",
        wrong_kind=FAILOVER_DIR / "node-state.dat",
        prints=lambda tmp, rq: ["inspect", "recording-log", str(FAILOVER_DIR / "recording.log")],
        accepts={"empty": "Aeron creates recording.log empty and fills it at the first election"},
    ),
    ("inspect", "node-state"): Command(
        given=lambda f, tmp: ["inspect", "node-state", f],
        suffix=".dat",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=lambda tmp, rq: ["inspect", "node-state", str(FAILOVER_DIR / "node-state.dat")],
    ),
    ("inspect", "mark-file"): Command(
        given=lambda f, tmp: ["inspect", "mark-file", f],
        suffix=".dat",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=_mark_file,
    ),
    ("inspect", "archive-catalog"): Command(
        given=lambda f, tmp: ["inspect", "archive-catalog", f],
        suffix=".catalog",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=_archive_catalog,
    ),
    ("inspect", "cluster-dir"): Command(
        given=lambda f, tmp: ["inspect", "cluster-dir", f],
        wrong_kind=CLEAN_START / "host0.pcap",
        prints=lambda tmp, rq: ["inspect", "cluster-dir", str(FAILOVER_DIR)],
    ),
    ("record",): Command(
        given=None,
        prints=lambda tmp, rq: _record(tmp / "rec"),
        json="lines",
        writes=lambda tmp, target: _record(target.parent),
    ),
    ("convert",): Command(
        given=lambda f, tmp: ["convert", f, "-o", str(tmp / "out.arrow")],
        suffix=".pcap",
        wrong_kind=SAMPLE,
        prints=lambda tmp, rq: ["convert", *(str(CLEAN_START / f"host{n}.pcap") for n in range(3)),
                                "-o", str(tmp / "out.arrow")],
        writes=lambda tmp, target: ["convert", str(CLEAN_START / "host0.pcap"), "-o", str(target)],
    ),
    ("query",): Command(
        given=lambda f, tmp: ["query", f, "SELECT count(*) AS n FROM events"],
        suffix=".arrow",
        wrong_kind=CLEAN_START / "host0.pcap",
        prints=lambda tmp, rq: ["query", str(SAMPLE), "SELECT type, count(*) AS n FROM events GROUP BY ALL ORDER BY ALL"],
    ),
    ("simulate",): Command(
        given=lambda f, tmp: ["simulate", f, "-o", str(tmp / "incident")],
        suffix=".toml",
        wrong_kind=SAMPLE,
        prints=_simulate,
        writes=lambda tmp, target: ["simulate", _tiny_scenario(tmp), "-o", str(target.parent)],
    ),
    ("replay",): Command(
        given=lambda f, tmp: ["replay", f],
        suffix=".arrow",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=lambda tmp, rq: ["replay", str(SAMPLE)],
        json="lines",
    ),
    ("tui",): Command(
        given=lambda f, tmp: ["tui", f, "--screenshot", str(tmp / "screen.svg")],
        suffix=".arrow",
        wrong_kind=FAILOVER_DIR / "recording.log",
        writes=lambda tmp, target: ["tui", str(SAMPLE), "--screenshot", str(target)],
    ),
    ("versions",): Command(given=None, prints=lambda tmp, rq: ["versions"]),
    ("diff",): Command(
        given=lambda f, tmp: ["diff", f, str(SAMPLE)],
        suffix=".arrow",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=lambda tmp, rq: ["diff", str(SAMPLE), "--model", "1.41.0", "--model", "1.47.3"],
    ),
    ("bisect",): Command(
        given=lambda f, tmp: ["bisect", f, "--good", "1.40.0", "--bad", "1.41.0", "--check", "no_divergences"],
        suffix=".arrow",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=lambda tmp, rq: ["bisect", str(BISECT_SAMPLE), "--good", "1.40.0", "--bad", "1.41.0",
                                "--check", "leader_elected_within(5s)"],
    ),
    ("export-scenario",): Command(
        given=lambda f, tmp: ["export-scenario", f, "-o", str(tmp / "scenario.txt")],
        suffix=".arrow",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=lambda tmp, rq: ["export-scenario", str(SAMPLE), "-o", str(tmp / "scenario.txt"),
                                "--window", "..200ms", "--no-minimise"],
        writes=lambda tmp, target: ["export-scenario", str(SAMPLE), "-o", str(target), "--window", "..200ms",
                                    "--no-minimise"],
    ),
    ("report",): Command(
        given=lambda f, tmp: ["report", f, "-o", str(tmp / "incident.html")],
        suffix=".arrow",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=lambda tmp, rq: ["report", str(SAMPLE), "-o", str(tmp / "incident.html")],
        writes=lambda tmp, target: ["report", str(SAMPLE), "-o", str(target)],
    ),
    ("export",): Command(
        given=lambda f, tmp: ["export", f, "-o", str(tmp / "trace.json")],
        suffix=".arrow",
        wrong_kind=FAILOVER_DIR / "recording.log",
        prints=lambda tmp, rq: ["export", str(SAMPLE), "--format", "perfetto", "-o", str(tmp / "trace.json")],
        writes=lambda tmp, target: ["export", str(SAMPLE), "-o", str(target)],
    ),
}

#: Commands that print no data (the contract exempts the TUI from --json).
NO_JSON = {("tui",)}


def _leaves(command, path: tuple[str, ...] = ()):
    children = getattr(command, "commands", None)
    if children:
        for name, child in sorted(children.items()):
            yield from _leaves(child, (*path, name))
    else:
        yield path, command


LEAVES = dict(_leaves(command()))


def _options(path: tuple[str, ...]) -> set[str]:
    return {opt for param in LEAVES[path].params for opt in param.opts}


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


def _ids(paths) -> list[str]:
    return [" ".join(p) for p in paths]


# --- every command is described, documented and scriptable ------------------------------------


def test_every_command_of_the_app_has_a_row_in_this_contract_table():
    assert set(LEAVES) == set(COMMANDS)


@pytest.mark.parametrize("path", [(), ("inspect",), *COMMANDS], ids=_ids([("recount",), ("inspect",), *COMMANDS]))
def test_help_shows_an_example_of_the_command(path, capsys):
    assert run([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Examples:" in out
    assert " ".join(("recount", *path)) + " " in " ".join(out.split())


@pytest.mark.parametrize("path", list(COMMANDS), ids=_ids(COMMANDS))
def test_every_command_that_prints_data_takes_json(path):
    assert ("--json" in _options(path)) == (path not in NO_JSON)


@pytest.mark.parametrize("path", list(COMMANDS), ids=_ids(COMMANDS))
def test_every_command_that_writes_files_takes_force(path):
    writes = _options(path) & {"--out", "-o", "--out-dir", "--screenshot"}
    assert not writes or "--force" in _options(path)
    assert (COMMANDS[path].writes is not None) == bool(writes)


PRINTING = [p for p in COMMANDS if COMMANDS[p].prints is not None]


@pytest.mark.parametrize("path", PRINTING, ids=_ids(PRINTING))
def test_with_json_stdout_holds_only_json(path, tmp_path, capsys, request):
    spec = COMMANDS[path]
    argv = spec.prints(tmp_path, request)
    assert run([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    if spec.json == "lines":
        records = [json.loads(line) for line in out.splitlines()]
        assert records and all(isinstance(r, dict) for r in records)
    else:
        assert out.count("\n") == 1
        assert json.loads(out) not in (None, {}, [])


def test_without_json_the_same_runs_print_for_people_not_json(tmp_path, capsys):
    assert run(["replay", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out.splitlines()[0])
    assert "divergence" in out


# --- bad input: exit 2, one line naming the file ---------------------------------------------

BAD_KINDS = ("missing", "directory", "empty", "random bytes", "wrong kind", "no events")


def _applies(kind: str, spec: Command) -> bool:
    if kind == "wrong kind":
        return spec.wrong_kind is not None
    if kind == "no events":  # commands that read captures
        return spec.suffix in (".arrow", ".pcap")
    return True


def _bad_input(kind: str, spec: Command, tmp: Path) -> Path:
    """The bad input of ``kind`` for a command expecting ``spec.suffix`` files."""
    base = tmp / "inputs"
    base.mkdir(exist_ok=True)
    name = base / f"input{spec.suffix}"
    if kind == "missing":
        return name
    if kind == "directory":
        name.mkdir()  # for cluster-dir: a directory without any of Aeron's files
        return name
    if kind == "empty":
        name.write_bytes(b"")
        return name
    if kind == "random bytes":
        name.write_bytes(random.Random(20240601).randbytes(4096))
        return name
    if kind == "wrong kind":
        assert spec.wrong_kind is not None
        target = base / (spec.wrong_kind.stem + spec.suffix) if spec.suffix else base / spec.wrong_kind.name
        shutil.copyfile(spec.wrong_kind, target)
        return target
    if kind == "no events":  # a capture in a format it reads, with nothing in it but a comment
        target = base / "nothing.jsonl"
        target.write_text("# no events here\n\n")
        return target
    raise AssertionError(kind)


BAD_CASES = []
for _path, _spec in COMMANDS.items():
    if _spec.given is None:
        continue
    for _kind in BAD_KINDS:
        if _kind in _spec.accepts or not _applies(_kind, _spec):
            continue
        marks = [pytest.mark.xfail(strict=True, reason=_spec.known_gaps[_kind])] if _kind in _spec.known_gaps else []
        BAD_CASES.append(pytest.param(_path, _kind, id=f"{' '.join(_path)}: {_kind}", marks=marks))


@pytest.mark.parametrize(("path", "kind"), BAD_CASES)
def test_bad_input_exits_2_with_one_line_naming_the_file(path, kind, tmp_path, capsys):
    spec = COMMANDS[path]
    bad = _bad_input(kind, spec, tmp_path)
    assert run(spec.given(str(bad), tmp_path)) == 2
    out, err = capsys.readouterr()
    line = _one_line(err)
    assert line.startswith("recount: ") and str(bad) in line
    assert out == ""


@pytest.mark.parametrize("path", list(COMMANDS), ids=_ids(COMMANDS))
def test_an_unknown_option_is_one_line_naming_the_command_and_its_help(path, capsys):
    assert run([*path, "--no-such-option"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(" ".join(("recount", *path)) + ":") and "--no-such-option" in line
    assert f"'{' '.join(('recount', *path))} --help'" in line


def test_a_bad_members_string_for_record_is_one_line(tmp_path, capsys):
    assert run(["record", "--members", "garbage", "--out", str(tmp_path / "rec"), "--duration", "0"]) == 2
    assert "garbage" in _one_line(capsys.readouterr().err)


def test_a_time_before_the_recording_is_refused_rather_than_replaying_nothing(capsys):
    # Captures carry epoch timestamps: "--until 200ms" would otherwise replay nothing and report success.
    for argv in (["replay", str(SAMPLE), "--until", "200ms"],
                 ["diff", str(SAMPLE), "--model", "1.41.0", "--model", "1.47.3", "--until", "200ms"],
                 ["bisect", str(BISECT_SAMPLE), "--good", "1.40.0", "--bad", "1.41.0", "--check",
                  "leader_elected_within(5s)", "--until", "200ms"]):
        assert run(argv) == 2
        line = _one_line(capsys.readouterr().err)
        assert "--until" in line and "before the first event" in line


# --- --force protects what is there ----------------------------------------------------------

WRITING = [p for p in COMMANDS if COMMANDS[p].writes is not None]
#: The file each writing command would put at the target (simulate and record write into a directory).
TARGET_NAME = {("simulate",): "summary.json", ("record",): "recording.arrows", ("tui",): "screen.svg",
               ("convert",): "out.arrow", ("export-scenario",): "scenario.txt", ("report",): "incident.html",
               ("export",): "trace.json"}


@pytest.mark.parametrize("path", WRITING, ids=_ids(WRITING))
def test_an_existing_output_is_kept_without_force(path, tmp_path, capsys):
    target = tmp_path / "out" / TARGET_NAME[path]
    target.parent.mkdir()
    target.write_text("the user's own file\n")
    assert run(COMMANDS[path].writes(tmp_path, target)) == 2
    line = _one_line(capsys.readouterr().err)
    assert "--force" in line and str(target.parent) in line
    assert target.read_text() == "the user's own file\n"


REPLACEABLE = [("convert",), ("export-scenario",), ("simulate",), ("report",), ("export",)]


@pytest.mark.parametrize("path", REPLACEABLE, ids=_ids(REPLACEABLE))
def test_with_force_the_existing_output_is_replaced(path, tmp_path, capsys):
    target = tmp_path / "out" / TARGET_NAME[path]
    target.parent.mkdir()
    target.write_text("the user's own file\n")
    assert run([*COMMANDS[path].writes(tmp_path, target), "--force"]) == 0
    assert target.read_bytes() != b"the user's own file\n"


# --- the same promises in a real process -----------------------------------------------------


def _python_m_cli(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": "7", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "cli", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_real_process_given_a_missing_file_exits_2_with_one_line_and_no_traceback(tmp_path):
    missing = str(tmp_path / "nowhere.arrow")
    for argv in (["replay", missing], ["inspect", "node-state", missing], ["query", missing, "SELECT 1"]):
        result = _python_m_cli(*argv)
        assert result.returncode == 2 and result.stdout == ""
        assert missing in _one_line(result.stderr)


def test_a_real_process_with_json_writes_only_json_to_stdout_and_progress_to_stderr():
    result = _python_m_cli("bisect", str(BISECT_SAMPLE), "--good", "1.40.0", "--bad", "1.41.0",
                           "--check", "leader_elected_within(5s)", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["firstChanged"] == "1.41.0"
    assert "1.40.0: holds" in result.stderr  # each trial is progress, on stderr

    result = _python_m_cli("replay", str(SAMPLE), "--json")
    assert result.returncode == 0
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[-1]["kind"] == "summary" and records[-1]["divergences"] == 0


def test_a_real_process_with_a_usage_error_prints_one_line():
    result = _python_m_cli("replay")
    assert result.returncode == 2 and result.stdout == ""
    assert "FILE" in _one_line(result.stderr)
