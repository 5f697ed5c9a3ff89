"""`recount inspect`: output for people and scripts, ClusterTool parity, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from cli.app import run
from formats.node_state import NodeStateFile
from formats.recording_log import RecordingLog
from tests.conftest import ROOT
from tests.test_mark_file import _mark_file


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(["inspect", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the real capture ---


def test_clustertool_format_prints_exactly_the_line_clustertool_printed(capsys, capture):
    code, out, err = _run(capsys, "recording-log", str(capture / "node0" / "recording.log"), "--format", "clustertool")
    printed = (capture / "node0" / "clustertool" / "recording-log.txt").read_text().splitlines()[1]
    assert (code, out, err) == (0, printed + "\n", "")


def test_recording_log_json_is_the_contract_document(capsys, capture):
    code, out, _ = _run(capsys, "recording-log", str(capture / "node2" / "recording.log"), "--json")
    document = json.loads(out)
    assert code == 0 and out.count("\n") == 1
    assert [(e["entryIndex"], e["type"], e["serviceId"]) for e in document["entries"]] == [
        (0, "TERM", -1), (1, "SNAPSHOT", 0), (2, "SNAPSHOT", -1)
    ]
    assert document["anomalies"] == []


def test_recording_log_table_shows_entries_and_the_last_term(capsys, capture):
    code, out, _ = _run(capsys, "recording-log", str(capture / "node1" / "recording.log"))
    assert code == 0
    assert "SNAPSHOT" in out and "1795312188516" in out and "last term: 0 from 0 to 10272" in out


def test_node_state_json_and_table(capsys, capture):
    path = str(capture / "node0" / "node-state.dat")
    code, out, _ = _run(capsys, "node-state", path, "--json")
    assert code == 0
    assert json.loads(out)["candidateTerm"] == {"candidateTermId": 0, "logPosition": 0, "timestamp": 1795312188496}
    code, out, _ = _run(capsys, "node-state", path)
    assert code == 0 and "candidateTermId=0" in out and "2026-11-22T01:49:48.496Z" in out


def test_mark_file_json_and_table(capsys, capture):
    path = str(capture / "node0" / "cluster-mark-service-0.dat")
    code, out, _ = _run(capsys, "mark-file", path, "--json")
    document = json.loads(out)
    assert code == 0 and document["componentType"] == "CONTAINER" and document["serviceName"] == "clustered-service-0-0"
    assert document["errors"][0]["encodedError"].startswith("io.aeron.cluster.service.ClusterTerminationException")
    code, out, _ = _run(capsys, "mark-file", path)
    assert code == 0 and "CONTAINER" in out and "ClusterTerminationException: expected termination" in out


def test_a_clean_cluster_dir_has_no_problems(capsys, capture):
    code, out, _ = _run(capsys, "cluster-dir", str(capture / "node0"), "--json")
    document = json.loads(out)
    assert code == 0 and document["problems"] == []
    assert list(document["markFiles"]) == ["cluster-mark.dat", "cluster-mark-service-0.dat"]
    assert document["nodeState"]["candidateTerm"]["candidateTermId"] == 0
    code, out, _ = _run(capsys, "cluster-dir", str(capture / "node0"))
    assert code == 0 and "no problems found" in out


# --- a member directory that does not add up ---


@pytest.fixture
def troubled_dir(tmp_path: Path) -> Path:
    log = RecordingLog()
    log.append_term(4, 0, 0, 1)
    log.append_term(4, 1, 1000, 2)
    log.commit_log_position(0, 900)  # term 0 now ends behind term 1's base
    log.append_snapshot(5, 1, 1000, 1200, 3, -1)  # a CM snapshot without its service's snapshot
    log.append_snapshot(6, 1, 1000, 1100, 3, 0)
    log.invalidate_entry(len(log.entries) - 2)
    (tmp_path / "recording.log").write_bytes(log.to_bytes())
    state = NodeStateFile.create()
    state.update_candidate_term_id(0, 0, 5)
    (tmp_path / "node-state.dat").write_bytes(state.to_bytes())
    (tmp_path / "cluster-mark.dat").write_bytes(_mark_file(component_type=1))
    service = _mark_file(component_type=2)
    service[8 + 56 : 8 + 60] = (7).to_bytes(4, "little", signed=True)  # memberId 7, not the CM's 2
    service[8 + 60 : 8 + 64] = (0).to_bytes(4, "little", signed=True)  # serviceId 0
    (tmp_path / "cluster-mark-service-0.dat").write_bytes(service)
    return tmp_path


def test_cluster_dir_flags_what_does_not_add_up(capsys, troubled_dir):
    code, out, _ = _run(capsys, "cluster-dir", str(troubled_dir), "--json")
    problems = json.loads(out)["problems"]
    assert code == 0
    expected = [
        "TERM 0 (entryIndex 0) ends at logPosition 900, behind the next term's termBaseLogPosition 1000",
        "node-state.dat: candidateTermId 0 is below the last TERM's leadershipTermId 1",
        "cluster-mark-service-0.dat: memberId 7 differs from cluster-mark.dat's memberId 2",
        "is marked invalid",
    ]
    for fragment in expected:
        assert any(fragment in problem for problem in problems), (fragment, problems)


def test_a_broken_file_in_a_cluster_dir_is_a_problem_not_a_failure(capsys, troubled_dir):
    (troubled_dir / "node-state.dat").write_bytes(b"\x00" * 10)
    code, out, _ = _run(capsys, "cluster-dir", str(troubled_dir), "--json")
    assert code == 0
    assert any(p.startswith("node-state.dat: cannot be read:") for p in json.loads(out)["problems"])


def test_mixed_term_recording_ids_are_reported_in_a_cluster_dir(capsys, tmp_path):
    good = RecordingLog()
    good.append_term(4, 0, 0, 1)
    other = RecordingLog()
    other.append_term(9, 1, 0, 1)
    (tmp_path / "recording.log").write_bytes(good.to_bytes() + other.to_bytes())
    code, out, _ = _run(capsys, "cluster-dir", str(tmp_path), "--json")
    problems = json.loads(out)["problems"]
    assert any("invalid TERM recordingId=9, expected recordingId=4" in p for p in problems)
    assert any("node-state.dat is missing" in p for p in problems)


# --- bad input: exit 2, one line on stderr naming the file, never a traceback ---


def _random_bytes(size: int) -> bytes:
    return random.Random(size).randbytes(size)


def _two_term_log() -> bytes:
    log = RecordingLog()
    log.append_term(1, 0, 0, 0)
    log.append_term(1, 1, 10, 0)
    return log.to_bytes()


def _bad_inputs(tmp: Path) -> dict[str, Path]:
    files = {
        "empty": b"",
        "random": _random_bytes(5000),
        "truncated-node-state": NodeStateFile.create().to_bytes()[:40],
        "truncated-mark-file": bytes(_mark_file())[:9000],
        "truncated-recording-log": _two_term_log()[:100],
    }
    paths = {}
    for name, data in files.items():
        paths[name] = tmp / name
        paths[name].write_bytes(data)
    (tmp / "a-directory").mkdir()
    paths["directory"] = tmp / "a-directory"
    paths["missing"] = tmp / "missing.dat"
    return paths


CASES = {
    "recording-log": ["random", "truncated-recording-log", "node-state", "mark-file", "directory", "missing"],
    "node-state": ["empty", "random", "truncated-node-state", "recording-log", "mark-file", "directory", "missing"],
    "mark-file": ["empty", "random", "truncated-mark-file", "recording-log", "node-state", "directory", "missing"],
}


@pytest.mark.parametrize("command, case", [(c, k) for c, cases in CASES.items() for k in cases])
def test_bad_input_exits_2_with_one_line_naming_the_file(capsys, tmp_path, command, case):
    paths = _bad_inputs(tmp_path)
    paths["recording-log"] = tmp_path / "recording.log"
    log = RecordingLog()
    log.append_term(1, 0, 0, 0)
    log.append_snapshot(2, 0, 0, 10, 0, -1)
    paths["recording-log"].write_bytes(log.to_bytes())
    paths["node-state"] = tmp_path / "node-state.dat"
    paths["node-state"].write_bytes(NodeStateFile.create().to_bytes())
    paths["mark-file"] = tmp_path / "cluster-mark.dat"
    paths["mark-file"].write_bytes(_mark_file())
    path = paths[case]
    code, out, err = _run(capsys, command, str(path), "--json")
    assert code == 2, (out, err)
    assert out == ""
    assert err.startswith("recount: ") and err.count("\n") == 1 and str(path) in err
    assert "Traceback" not in err


def test_an_empty_recording_log_is_what_aeron_creates_and_not_an_error(capsys, tmp_path):
    (tmp_path / "recording.log").write_bytes(b"")
    code, out, _ = _run(capsys, "recording-log", str(tmp_path / "recording.log"))
    assert code == 0 and "an empty recording.log" in out


@pytest.mark.parametrize("case", ["file", "missing", "empty-directory"])
def test_cluster_dir_refuses_what_is_not_a_directory_of_aeron_files(capsys, tmp_path, case):
    target = {"file": tmp_path / "f", "missing": tmp_path / "nope", "empty-directory": tmp_path / "d"}[case]
    if case == "file":
        target.write_bytes(b"x")
    if case == "empty-directory":
        target.mkdir()
    code, _, err = _run(capsys, "cluster-dir", str(target))
    assert code == 2 and err.startswith(f"recount: {target}") and err.count("\n") == 1


def test_huge_or_sparse_files_are_refused_quickly(capsys, tmp_path):
    huge = tmp_path / "huge"
    with open(huge, "wb") as file:
        file.truncate(200 << 20)  # sparse: 200 MiB of zeros that take no disk
    for command, fragment in (("recording-log", "far larger"), ("node-state", "far larger"), ("mark-file", "all zeros")):
        code, _, err = _run(capsys, command, str(huge))
        assert code == 2 and fragment in err


def test_json_and_another_format_together_is_a_usage_error(capsys, tmp_path):
    (tmp_path / "recording.log").write_bytes(_two_term_log())
    code, _, err = _run(capsys, "recording-log", str(tmp_path / "recording.log"), "--json", "--format", "clustertool")
    assert code == 2 and "either --json or --format" in err


def test_help_shows_examples(capsys):
    for command in ("recording-log", "node-state", "mark-file", "cluster-dir"):
        assert run(["inspect", command, "--help"]) == 0
        assert "Examples" in capsys.readouterr().out


# --- the real command line, in a subprocess ---


def _subprocess(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "cli", "inspect", *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )


@pytest.mark.parametrize("command", ["recording-log", "node-state", "mark-file", "cluster-dir"])
def test_each_command_works_and_fails_cleanly_in_a_real_process(tmp_path, command):
    good = {
        "recording-log": "recording.log",
        "node-state": "node-state.dat",
        "mark-file": "cluster-mark.dat",
        "cluster-dir": ".",
    }[command]
    (tmp_path / "recording.log").write_bytes(b"")
    (tmp_path / "node-state.dat").write_bytes(NodeStateFile.create().to_bytes())
    (tmp_path / "cluster-mark.dat").write_bytes(_mark_file())
    ok = _subprocess(command, str(tmp_path / good), "--json")
    assert ok.returncode == 0, ok.stderr
    json.loads(ok.stdout)
    bad = tmp_path / "bad"
    bad.write_bytes(_random_bytes(3000))
    failed = _subprocess(command, str(bad))
    assert failed.returncode == 2
    assert failed.stdout == "" and failed.stderr.startswith("recount: ") and failed.stderr.count("\n") == 1
