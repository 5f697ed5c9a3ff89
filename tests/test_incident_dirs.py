"""Incidents as users bring them: directories, member directories and tarballs in; partial evidence said.

`recount replay DIR` must give exactly the trace that converting the explicit file list and replaying
the file gives; what was found and how it was assigned to members is printed; a capture holding only
some members' side says so before any result; an input given twice is read once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from cli.app import run
from recorder.discovery import discover, distinct_inputs, expand_inputs

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "leader-failover"


def _sample_files(root: Path) -> list[str]:
    """The sample's inputs as a user would list them by hand."""
    files = [root / f"host{n}.pcap" for n in range(3)]
    for n in range(3):
        files += [root / f"node{n}" / "agent-events.log", root / f"node{n}" / "cluster"]
    return [str(f) for f in files]


def _real_files(root: Path) -> list[str]:
    files = [root / "capture.pcap"]
    for n in range(3):
        files += [root / f"node{n}", root / f"node{n}" / "agent-events.log"]
    return [str(f) for f in files]


def _trace(capsys, *args: str) -> tuple[str, str]:
    capsys.readouterr()
    assert run(["replay", *args, "--json"]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def _explicit_trace(capsys, tmp_path: Path, files: list[str]) -> str:
    out = tmp_path / "explicit.arrow"
    assert run(["convert", *files, "-o", str(out), "--force"]) == 0
    return _trace(capsys, str(out))[0]


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """samples/leader-failover as a user copies it (without the replay file the simulator wrote)."""
    target = tmp_path / "incident"
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns("incident.arrow", "summary.json", "*.toml"))
    return target


def test_replay_of_a_copied_sample_directory_equals_replay_of_its_explicit_file_list(capsys, tmp_path, sample_copy):
    from_dir, err = _trace(capsys, str(sample_copy))
    assert from_dir == _explicit_trace(capsys, tmp_path, _sample_files(sample_copy))
    summary = json.loads(from_dir.splitlines()[-1])
    assert summary["kind"] == "summary" and summary["divergences"] == 0
    # What was found, and which member each input was taken for, on stderr.
    assert f"found in {sample_copy}" in err
    assert "node1/agent-events.log" in err and "member 1" in err
    assert "host2.pcap" in err and "taken on the host of member(s) 2" in err


def test_replay_of_a_real_capture_directory_equals_replay_of_its_explicit_file_list(capsys, tmp_path, capture):
    from_dir, err = _trace(capsys, str(capture))
    assert from_dir == _explicit_trace(capsys, tmp_path, _real_files(capture))
    assert "capture.pcapng" in err  # found, and its packets taken once (the same as capture.pcap's)


def test_a_nested_copy_of_a_cluster_dir_is_passed_over_with_a_note(tmp_path, sample_copy):
    shutil.copytree(sample_copy / "node0" / "cluster", sample_copy / "node0" / "cluster" / "before")
    [incident] = discover([str(sample_copy)], incident_depth=0)
    assert str(sample_copy / "node0" / "cluster" / "before") not in incident.paths
    assert any("before" in note and "not read" in note for note in incident.notes)
    assert run(["convert", str(sample_copy), "-o", str(tmp_path / "x.arrow")]) == 0


def test_a_tarball_of_an_incident_replays_as_the_directory(capsys, tmp_path, sample_copy):
    tarball = tmp_path / "incident.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(sample_copy, arcname="incident")
    assert _trace(capsys, str(tarball))[0] == _trace(capsys, str(sample_copy))[0]


def test_member_directories_in_the_samples_layout_hold_their_cluster_dir_and_agent_log(capsys, tmp_path, sample_copy):
    # convert --help's own example: captures and member directories.
    members = [str(sample_copy / f"node{n}") for n in range(3)]
    captures = [str(sample_copy / f"host{n}.pcap") for n in range(3)]
    out = tmp_path / "members.arrow"
    assert run(["convert", *captures, *members, "-o", str(out)]) == 0
    assert _trace(capsys, str(out))[0] == _explicit_trace(capsys, tmp_path, _sample_files(sample_copy))
    expanded = expand_inputs([members[0]])
    assert sorted(os.path.basename(p) for p in expanded.paths) == ["agent-events.log", "cluster"]


def test_a_cluster_dir_given_on_its_own_is_read_as_given_and_found_whole_inside_an_incident(capture):
    member = capture / "node1"
    assert expand_inputs([str(member)]).paths == [str(member)]  # as before: its agent log only when given
    [incident] = discover([str(capture)], incident_depth=0)
    assert {str(member), str(member / "agent-events.log")} <= set(incident.paths)


def test_convert_of_a_directory_reports_what_it_found_in_json(capsys, tmp_path, sample_copy):
    capsys.readouterr()
    assert run(["convert", str(sample_copy), "-o", str(tmp_path / "x.arrow"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    found = {item["path"]: item for item in document["found"][0]["found"]}
    assert found["node2/cluster"] == {"path": "node2/cluster", "kind": "cluster-dir", "members": [2]}
    assert found["host0.pcap"]["members"] == [0]
    assert document["coverage"]["seen"] == [0, 1, 2] and document["coverage"]["notSeen"] == []


def test_a_directory_with_nothing_to_read_is_one_line_and_exit_2(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("nothing here\n")
    capsys.readouterr()
    assert run(["replay", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no captures" in err and str(tmp_path / "empty") in err


# --- partial evidence --------------------------------------------------------------------------------
def test_one_hosts_capture_alone_warns_naming_the_members_not_seen_before_any_divergence():
    # One process, stdout and stderr into one pipe: the order a user sees in a terminal.
    result = subprocess.run([sys.executable, "-m", "cli", "replay", str(SAMPLE / "host0.pcap"), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, check=False)
    text = result.stdout
    warning = text.index("member(s) 1, 2 not seen")
    assert "seen: 0" in text[warning:warning + 300]
    assert warning < text.index('"kind":"divergence"')
    assert "endpoints not known" in text and "member 1: consensus" in text


def test_a_replay_file_of_one_hosts_capture_warns_too(capsys, tmp_path):
    out = tmp_path / "host0.arrow"
    assert run(["convert", str(SAMPLE / "host0.pcap"), "-o", str(out)]) == 0
    capsys.readouterr()
    run(["replay", str(out), "--json"])
    assert "member(s) 1, 2 not seen" in capsys.readouterr().err


def test_a_whole_incident_warns_of_no_unseen_member(capsys, sample_copy):
    _, err = _trace(capsys, str(sample_copy))
    assert "not seen" not in err


def test_the_same_capture_given_twice_is_read_once_with_a_note(capsys, tmp_path):
    once, twice = tmp_path / "once.arrow", tmp_path / "twice.arrow"
    pcap = str(SAMPLE / "host0.pcap")
    copy = tmp_path / "copy-of-host0.pcap"
    shutil.copyfile(pcap, copy)
    assert run(["convert", pcap, "-o", str(once), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert run(["convert", pcap, str(copy), pcap, "-o", str(twice), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["events"] == first["events"]
    assert any("given twice" in note for note in second["notes"])
    assert any("the same bytes as" in note for note in second["notes"])


def test_distinct_inputs_keeps_the_first_of_each_and_different_files_of_one_size(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_bytes(b"abcd")
    b.write_bytes(b"abcd")
    c.write_bytes(b"abce")
    kept, notes = distinct_inputs([str(a), str(c), str(b), str(tmp_path / "." / "a")])
    assert kept == [str(a), str(c)] and len(notes) == 2


def test_repeated_capture_problems_are_counted_not_repeated(capsys, tmp_path):
    capsys.readouterr()
    assert run(["convert", str(SAMPLE / "host0.pcap"), "-o", str(tmp_path / "x.arrow")]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "which is no member endpoint" in line]
    assert len(lines) == len(set(line.split(": ", 2)[-1] for line in lines))  # one line per distinct problem
    assert any("more like it" in line for line in lines)


# --- output paths, progress --------------------------------------------------------------------------
def test_an_output_in_a_missing_directory_is_named_as_given(capsys):
    capsys.readouterr()
    assert run(["convert", str(SAMPLE / "host0.pcap"), "-o", "/missing-recount-dir/x.arrow"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("recount: /missing-recount-dir/x.arrow: cannot write it: directory '/missing-recount-dir'"
                   " does not exist")


def test_progress_is_silent_without_a_terminal_unless_asked(capsys, sample_copy):
    _, quiet = _trace(capsys, str(sample_copy))
    assert "replaying ..." not in quiet and "reading" not in quiet
    capsys.readouterr()
    try:
        assert run(["--progress", "replay", str(sample_copy), "--json"]) == 0
    finally:
        from cli import progress

        progress.requested = None
    asked = capsys.readouterr().err
    assert "replaying ..." in asked and f"reading {sample_copy} ..." in asked


def test_convert_helps_own_examples_on_the_samples_work(capsys, tmp_path, monkeypatch):
    import shlex

    from cli.app import command

    monkeypatch.chdir(ROOT)
    epilog = command().commands["convert"].epilog  # what `recount convert --help` shows, unwrapped
    examples = [m for m in epilog.split("recount convert ")[1:] if m.startswith("samples/")]
    assert len(examples) >= 2
    for example in examples:
        argv = shlex.split(example.split("\n", 1)[0])
        out = argv.index("-o") + 1
        argv[out] = str(tmp_path / argv[out])
        assert run(["convert", *argv]) == 0, example
