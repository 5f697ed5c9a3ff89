"""`recount convert` and `recount replay`: files in, trace out, bad input as exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.app import run
from engine.scenario import World, run_command
from engine.trace import verify
from formats.events import dump_jsonl

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    """A JSON Lines capture of a simulated 3-member cluster: startup, the leader dies, failover."""
    world = World(recording=[])
    for command in ("cluster 3 delays=0:300ms/150ms,1:100ms,2:200ms/250ms", "advance 1s", "crash 1", "advance 12s"):
        run_command(world, command)
    path = tmp_path_factory.mktemp("capture") / "failover.jsonl"
    path.write_text("# simulated\n" + "".join(dump_jsonl(world.recording)), encoding="utf-8")
    return path


def test_convert_writes_a_replay_file_and_says_what_it_wrote(capture, tmp_path, capsys):
    out = tmp_path / "failover.arrow"
    assert run(["convert", str(capture), "-o", str(out), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["out"] == str(out) and document["nodes"] == [0, 1, 2]
    assert document["events"] == len(capture.read_text().splitlines()) - 1
    assert out.exists() and not list(tmp_path.glob("*.tmp-*"))


def test_convert_refuses_to_overwrite_without_force(capture, tmp_path, capsys):
    out = tmp_path / "x.arrow"
    out.write_bytes(b"precious")
    assert run(["convert", str(capture), "-o", str(out)]) == 2
    assert "use --force" in capsys.readouterr().err
    assert out.read_bytes() == b"precious"
    assert run(["convert", str(capture), "-o", str(out), "--force"]) == 0
    assert out.read_bytes() != b"precious"


def test_replaying_the_replay_file_and_the_capture_gives_the_same_trace(capture, tmp_path, capsys):
    out = tmp_path / "same.arrow"
    assert run(["convert", str(capture), "-o", str(out)]) == 0
    capsys.readouterr()
    assert run(["replay", str(out), "--json"]) == 0
    from_arrow = capsys.readouterr().out
    assert run(["replay", str(capture), "--json"]) == 0
    from_jsonl = capsys.readouterr().out
    assert from_arrow == from_jsonl
    lines = from_arrow.splitlines()
    assert verify(lines)
    summary = json.loads(lines[-1])
    assert summary["divergences"] == 0 and summary["model"] == "1.47.3"


def test_replay_options_select_members_and_stop_early(capture, capsys):
    assert run(["replay", str(capture), "--json", "--node", "2", "--until", "500ms"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["node"] for r in records[:-1]} == {2}
    assert records[-1]["ts"] == 500_000_000


def test_the_timeline_reads_as_one_line_per_record_with_a_summary(capture, capsys):
    assert run(["replay", str(capture), "--until", "200ms"]) == 0
    text = capsys.readouterr().out
    assert "1 NOMINATE → CANDIDATE_BALLOT" in text
    assert "1→0 RequestVote candidateTermId=0 log=(-1,0)" in text
    assert "0 divergence(s)" in text


def test_repeated_heartbeats_are_hidden_unless_asked_for_and_counted(capture, capsys):
    assert run(["replay", str(capture), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    periodic = [r for r in records if r["kind"] == "send" and r["type"] in ("AppendPosition", "CommitPosition", "CanvassPosition")]
    seen: dict = {}
    repeats = 0
    for r in periodic:  # a repeat: the same fields as the member's last send of that type to that peer
        key = (r["node"], r["peer"], r["channel"], r["type"])
        repeats += seen.get(key) == r["fields"]
        seen[key] = r["fields"]
    assert repeats > 0

    assert run(["replay", str(capture)]) == 0
    quiet = capsys.readouterr().out
    assert f"{repeats} repeated heartbeat(s) hidden (--heartbeats shows them)" in quiet
    assert run(["replay", str(capture), "--heartbeats"]) == 0
    loud = capsys.readouterr().out
    assert "hidden" not in loud
    assert len(loud.splitlines()) - len(quiet.splitlines()) == repeats - 1  # the count line goes too
    # Nothing but heartbeats is hidden: the election reads the same either way.
    assert [line for line in quiet.splitlines() if "→ CANDIDATE_BALLOT" in line or "Vote" in line] == [
        line for line in loud.splitlines() if "→ CANDIDATE_BALLOT" in line or "Vote" in line
    ]


def test_times_are_seconds_with_milliseconds_or_utc_wall_clock(capture, capsys):
    assert run(["replay", str(capture), "--until", "200ms"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.split()[0] == "+0.000s"
    assert run(["replay", str(capture), "--until", "200ms", "--wall-clock"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.split()[0] == "1970-01-01T00:00:00.000Z"  # the simulated capture's clock starts at 0


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


MEMBERS = "0,h:1,h:2,h:3,h:4,h:5|1,h:11,h:12,h:13,h:14,h:15|2,h:21,h:22,h:23,h:24,h:25"
START = json.dumps({"ts": 0, "node": 0, "dir": "local", "peer": None, "channel": "local", "type": "MemberStart",
                    "fields": {"clusterMembers": MEMBERS}})


@pytest.mark.parametrize(
    "line, expected",
    [
        ("{oops", "line 3: not valid JSON"),
        ('{"ts":5,"node":0,"dir":"in","peer":1,"channel":"consensus","type":"Voet","fields":{}}', "line 3: unknown message type 'Voet'"),
        ('{"ts":5,"node":0,"dir":"in","peer":1,"channel":"consensus","type":"Vote","fields":{"candidateTermId":0}}',
         "line 3: Vote: Vote: missing field"),
    ],
)
@pytest.mark.parametrize("command", ["convert", "replay"])
def test_bad_jsonl_is_exit_2_naming_file_and_line(tmp_path, capsys, command, line, expected):
    path = _write(tmp_path, "bad.jsonl", [START, "", line])
    argv = [command, str(path)] + (["-o", str(tmp_path / "o.arrow")] if command == "convert" else [])
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err
    assert expected.split(":")[0] in err and expected.rsplit(": ", 1)[-1].split("'")[0] in err


def test_an_event_before_its_member_start_is_exit_2_naming_the_line(tmp_path, capsys):
    vote = '{"ts":5,"node":1,"dir":"in","peer":0,"channel":"consensus","type":"RequestVote","fields":{"logLeadershipTermId":-1,"logPosition":0,"candidateTermId":0,"candidateMemberId":0}}'
    path = _write(tmp_path, "orphan.jsonl", [START, vote])
    assert run(["replay", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert f"{path}, line 2" in err and "before its MemberStart" in err


def test_an_unknown_model_is_exit_2_listing_the_known_ones(capture, capsys):
    assert run(["replay", str(capture), "--model", "9.9.9"]) == 2
    err = capsys.readouterr().err
    assert "unknown model '9.9.9'" in err and "1.47.3" in err and "1.40.0" in err


def test_a_missing_file_is_exit_2(tmp_path, capsys):
    assert run(["replay", str(tmp_path / "nope.arrow")]) == 2
    assert "nope.arrow" in capsys.readouterr().err


def _subprocess(args: list[str], seed: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=ROOT, env=env, capture_output=True, timeout=120)


def test_the_json_trace_is_byte_identical_across_processes_with_different_hash_seeds(capture, tmp_path):
    out = tmp_path / "det.arrow"
    converted = _subprocess(["convert", str(capture), "-o", str(out)], "1")
    assert converted.returncode == 0, converted.stderr
    first = _subprocess(["replay", str(out), "--json"], "1")
    second = _subprocess(["replay", str(out), "--json"], "12345")
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert first.stdout == second.stdout
    assert first.stdout.count(b"\n") > 100


def test_a_real_process_reports_bad_input_on_one_line_without_a_traceback(tmp_path):
    path = _write(tmp_path, "bad.jsonl", [START, "[]"])
    result = _subprocess(["replay", str(path)], "0")
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1 and b"Traceback" not in result.stderr
    assert f"{path}, line 2".encode() in result.stderr


def test_a_member_the_replay_does_not_have_is_exit_2(capture, capsys):
    assert run(["replay", str(capture), "--node", "7"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--node 7: no member 7 in " + str(capture) + " (members: 0, 1, 2)") and "\n" not in err


def test_the_plain_timeline_is_the_styled_one_without_styles(capture):
    # Into a pipe the timeline is written as plain text (fast); on a terminal rich renders it styled.
    # Both must say the same, divergences and wall-clock times included.
    from cli import render_replay
    from engine.replay import replay
    from formats.events import parse_jsonl

    events = list(parse_jsonl(capture.read_text(encoding="utf-8").splitlines()[1:], source=str(capture)))
    records = [r for r in replay(events, nodes=[0, 2]) if r["kind"] != "summary"]
    flipped = dict(records[5], kind="divergence", event=12, reason="x")  # a divergence line, made up
    origin = records[0]["ts"]
    for record in [*records, flipped]:
        for wall_clock in (False, True):
            assert (render_replay.timeline_text(record, origin, wall_clock=wall_clock)
                    == render_replay.timeline_line(record, origin, wall_clock=wall_clock).plain)


def test_the_timeline_says_when_a_process_was_killed_and_the_table_which_still_run(capture, capsys):
    # The capture's member 1 is killed at 1 s; its state at the end is as it left it, not a live leader.
    assert run(["replay", str(capture)]) == 0
    out = capsys.readouterr().out
    assert "   +1.000s  1 process killed (MemberCrash in the inputs)" in out.splitlines()
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:]] for line in out.splitlines()
            if line.startswith("│")}
    assert rows["1"][0] == "killed +1.000s" and rows["0"][0] == rows["2"][0] == "running"
    assert run(["replay", str(capture), "--node", "0"]) == 0
    assert "process killed" not in capsys.readouterr().out  # member 1 is not replayed
