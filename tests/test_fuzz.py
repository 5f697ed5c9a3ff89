"""Fuzzing every reader of user files (issue 14): a short fixed-seed run of the mutation fuzzer
(`tests/fuzzing.py`) per reader, the inputs it once found failing, and the fuzzer's own checks.

A reader passes an input when it reads it or refuses it with recount's `DecodeError` (one line);
anything else is a failure.  Long runs: ``python benchmarks/fuzz.py --minutes 10``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import fuzzing

ROOT = Path(__file__).resolve().parents[1]

#: Inputs per reader in the fixed run: a few seconds each on this machine (pyarrow readers run in a
#: child process; the pcap reader decodes whole captures of up to 5 MB).
FIXED_RUN = {
    "replay": 400,
    "replay_cli": 1,  # `recount replay` and `query` in subprocesses; more in the CLI test below
    "recording": 1000,
    "jsonl": 800,
    "pcap": 100,
    "agent_log": 500,
    "recording_log": 3000,
    "node_state": 1000,
    "mark_file": 1000,
    "sbe": 2500,
    "archive_catalog": 1500,
}


def test_every_reader_has_a_fixed_run():
    assert set(FIXED_RUN) == set(fuzzing.READERS)


@pytest.mark.parametrize("name", sorted(fuzzing.READERS))
def test_a_fixed_fuzz_run_finds_nothing(name):
    tried, failures = fuzzing.fuzz(name, seed=0, count=FIXED_RUN[name])
    assert tried == FIXED_RUN[name]
    assert not failures, "\n".join(f.describe() for f in failures)


@pytest.mark.parametrize("name", sorted(fuzzing.READERS))
def test_every_input_the_fuzzer_once_found_failing_now_reads_or_is_refused(name):
    failures = fuzzing.replay_regressions(name)
    assert not failures, "\n".join(f.describe() for f in failures)


def test_regression_files_are_kept_for_the_arrow_readers():
    # The segfaults of issue 14 came from these two; the files must not go missing unnoticed.
    assert len(fuzzing.regression_files("replay")) >= 10
    assert len(fuzzing.regression_files("recording")) >= 10


@pytest.mark.parametrize("name", sorted(set(fuzzing.READERS) - {"replay_cli"}))  # replay_cli: replay's seeds
def test_seed_files_read_without_a_problem(name):
    """Unmutated seeds must read: a fuzzer whose seeds are all refused early tests nothing."""
    refused = []
    with tempfile.TemporaryDirectory() as work:
        for label, data in fuzzing.labelled_seeds(name):
            if "v1.41.7" in label and name == "agent_log":
                continue  # Aeron 1.41's agent-log dialect is read once formats/agent_log.py knows it
            if (problem := fuzzing.check(name, data, Path(work), refusal_fails=True)) is not None:
                refused.append(f"{label}: {problem}")
    assert not refused, "\n".join(refused)


def test_inputs_are_deterministic_and_mutated():
    for name in fuzzing.READERS:
        first = [fuzzing.make_input(name, 5, i) for i in range(20)]
        assert first == [fuzzing.make_input(name, 5, i) for i in range(20)]
        seeds = set(fuzzing.seeds(name))
        assert sum(data not in seeds for data in first) >= 15, name


def test_the_fuzzer_reports_a_crash_of_the_interpreter_and_goes_on():
    # A reader that segfaults on a zero byte and raises TypeError on a short input.
    tried, failures = fuzzing.fuzz("crash-on-purpose", seed=0, count=60)
    assert tried == 60
    kinds = {f.what.split(":")[0].split(" (")[0] for f in failures}
    assert "the interpreter died of SIGSEGV" in kinds and "TypeError" in kinds
    for failure in failures:
        assert failure.data == fuzzing.make_input("crash-on-purpose", 0, failure.index)
        if "SIGSEGV" in failure.what:
            assert b"\x00" in failure.data and "exit 139" in failure.what
    # ...and DecodeError refusals are not failures: some inputs passed.
    assert len(failures) < 60


# --- the command line on damaged replay files and recordings, in real subprocesses ----------------

#: Kept inputs that crashed the interpreter or raised SystemError before issue 14.
_CRASHERS = {
    "replay": ["0fa1fa0231702587.arrow", "3ac742a63d06ae70.arrow"],  # SIGSEGV
    "recording": ["5500d9523d5d8f40.arrows", "64c56d4a94e2267a.arrows"],  # SIGSEGV, SystemError
}


def _commands(tmp: Path) -> list[tuple[str, list[str]]]:
    runs = []
    for name in _CRASHERS["replay"]:
        path = str(fuzzing.REGRESSIONS / "replay" / name)
        runs.append((f"replay {name}", ["replay", path]))
        runs.append((f"query {name}", ["query", path, "SELECT type, count(*) FROM events GROUP BY ALL"]))
        runs.append((f"diff {name}", ["diff", path, str(ROOT / "samples" / "clean-start" / "incident.arrow")]))
    systemerror = str(fuzzing.REGRESSIONS / "replay" / "0babc8ab75e3b4be.arrow")
    runs.append(("replay 0babc8ab75e3b4be.arrow", ["replay", systemerror]))
    for name in _CRASHERS["recording"]:
        path = str(fuzzing.REGRESSIONS / "recording" / name)
        runs.append((f"convert {name}", ["convert", path, "-o", str(tmp / f"{name}.out.arrow")]))
    # Fresh mutations as the fuzzer makes them: replay files, and a capture for `recount convert`.
    for index in range(2):
        path = tmp / f"mutated-{index}.arrow"
        path.write_bytes(fuzzing.make_input("replay", 0, index))
        runs.append((f"mutated replay-{index}", ["replay", str(path)]))
    for reader, suffix in (("recording", ".arrows"), ("jsonl", ".jsonl")):
        path = tmp / f"mutated{suffix}"
        path.write_bytes(fuzzing.make_input(reader, 0, 0))
        runs.append((f"mutated convert {reader}", ["convert", str(path), "-o", str(tmp / f"{reader}.out.arrow")]))
    return runs


def test_damaged_replay_files_and_recordings_are_one_line_and_exit_2_on_the_command_line(tmp_path):
    """`recount replay/query/diff/convert` in real subprocesses (a segfault is exit 139 there): each
    damaged input ends with exit 2 and one line naming the file; a mutation that left the file
    readable may succeed (exit 0)."""
    runs = _commands(tmp_path)
    children = [
        (label, args, subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True))
        for label, args in runs
    ]
    problems = []
    for label, args, child in children:
        out, err = child.communicate(timeout=300)
        lines = err.strip().splitlines()
        mutated = label.startswith("mutated")
        if child.returncode == 0 and mutated:
            continue
        if child.returncode != 2 or len(lines) != 1 or not lines[0].startswith(f"recount: {args[1]}"):
            problems.append(f"{label}: exit {child.returncode}, stderr {err[-400:]!r}")
        if args[0] == "convert":
            assert not Path(args[-1]).exists(), f"{label}: wrote an output from a damaged input"
    assert not problems, "\n".join(problems)
