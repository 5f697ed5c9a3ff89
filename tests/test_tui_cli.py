"""`recount tui` on the command line: arguments, bad input (exit 2, one line), headless screenshots."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.app import run

ROOT = Path(__file__).resolve().parents[1]
FAILOVER = ROOT / "samples" / "leader-failover" / "incident.arrow"


@pytest.fixture
def failover_path() -> Path:
    if not FAILOVER.exists():
        pytest.skip(f"sample {FAILOVER} not found (recount simulate writes the samples)")
    return FAILOVER


def recount(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=240,
    )


def test_help_shows_an_example_and_the_options(capsys):
    assert run(["tui", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--model", "--diff", "--go", "--screenshot"):
        assert option in out
    assert "recount tui samples/leader-failover/incident.arrow" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tui", "no-such-file.arrow"], "no-such-file.arrow: No such file or directory"),
        (["tui", "{sample}", "--model", "0.1"], "unknown model '0.1'; known models:"),
        (["tui", "{sample}", "--go", "term two"], "--go: term takes an integer"),
        # a target the replay does not have: exit 2 before any screen, not a screen that says nothing
        (["tui", "{sample}", "--go", "term 9"], "--go term 9: term 9 does not appear"),
        (["tui", "{sample}", "--go", "seq 99999"], "--go seq 99999: no event has seq 99999"),
        (["tui", "{sample}", "--go", "next Foo"], "--go next Foo: no Foo event in this replay"),
        (["tui", "{sample}", "--go", "time 999s"], "--go time 999s: after the last event (+18.000s)"),
        (
            ["tui", "{sample}", "--diff", "nothing-here"],
            "--diff: 'nothing-here' is neither a file nor a known model",
        ),
        (
            ["tui", "{sample}", "--screenshot", "{tmp}/x.svg", "--size", "wide"],
            "--size: expected COLUMNSxROWS",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, message, capsys, failover_path, tmp_path):
    argv = [a.format(sample=failover_path, tmp=tmp_path) for a in args]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_a_file_that_is_not_a_replay_exits_2_naming_it(tmp_path, capsys):
    bad = tmp_path / "garbage.arrow"
    bad.write_bytes(b"\x00" * 64)
    assert run(["tui", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "garbage.arrow" in err and "not an Arrow IPC file" in err and "Traceback" not in err


def test_a_capture_with_no_events_exits_2_naming_it(tmp_path, capsys):
    empty = tmp_path / "nothing.jsonl"
    empty.write_text("# no events here\n\n")
    assert run(["tui", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err == f"recount: {empty}: holds no events, so there is nothing to show\n"


def test_screenshot_draws_the_screen_headless_in_a_real_process(failover_path, tmp_path):
    out = tmp_path / "term1.svg"
    done = recount("tui", str(failover_path), "--go", "term 1", "--screenshot", str(out))
    assert done.returncode == 0, done.stderr
    svg = out.read_text()
    assert svg.startswith("<svg")
    # The moment member 1 was elected: its row in the cluster table, as drawn.
    assert "LEADER_READY" in svg and "+15.064s" in svg
    again = recount("tui", str(failover_path), "--screenshot", str(out))
    assert again.returncode == 2 and "exists (use --force to overwrite it)" in again.stderr
    assert out.read_text() == svg
