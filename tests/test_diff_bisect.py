"""`recount diff`, `recount bisect`, the check language, `recount export-scenario` and the two version samples.

The samples ``samples/graceful-close-across-versions`` and ``samples/replay-past-commit`` are made by
`recount simulate` (Aeron 1.47.3 behaviour); under cluster replay their outcome differs across
releases, and bisect must find the release that made the difference: 1.41.0 (graceful-close slowdown
came in), 1.42.0 (it went away, #1472) and 1.50.0 (follower replay bounded by the commit position,
#1898).

The two samples' committed bytes are regression pins of our own simulator, not evidence about Aeron;
which release made a difference is judged against Aeron's history (engine/versions.py) and, where one
exists, a real capture of that release (tests/test_real_version_captures.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli.app import run
from engine.cluster_replay import cluster_replay
from recorder import convert as loader
from recorder.bisect import BisectError, bisect
from recorder.checks import CheckError, leaderless_stretches, parse_check
from recorder.diff import Side, diff_traces, member_behaviour
from recorder.export_scenario import export_scenario, format_duration, parse_window
from recorder.simulate import load_scenario, render_files, simulate

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
GRACEFUL = SAMPLES / "graceful-close-across-versions"
REPLAY = SAMPLES / "replay-past-commit"
MS = 1_000_000


@pytest.fixture(scope="module")
def graceful():
    return loader.load(GRACEFUL / "incident.arrow")


@pytest.fixture(scope="module")
def past_commit():
    return loader.load(REPLAY / "incident.arrow")


def traced(loaded: Any, model: str) -> list[dict[str, Any]]:
    return list(cluster_replay(loaded.events, model=model, refs=loaded.refs, ref_kind=loaded.ref_kind))


# == the samples =====================================================================================================


@pytest.mark.parametrize("sample", [GRACEFUL, REPLAY], ids=lambda p: p.name)
def test_each_version_sample_regenerates_to_the_committed_replay_file(sample):
    files = render_files(simulate(load_scenario(sample / "scenario.toml")))
    committed = (sample / "incident.arrow").read_bytes()
    assert hashlib.sha256(files["incident.arrow"]).hexdigest() == hashlib.sha256(committed).hexdigest(), (
        f"regenerate with `recount simulate {sample.relative_to(ROOT)}/scenario.toml -o {sample.relative_to(ROOT)} --force`"
    )


def test_the_graceful_close_sample_elects_slowly_only_in_1_41(graceful):
    check = parse_check("leader_elected_within(5s)")
    answers = {v: check.evaluate(traced(graceful, v)) for v in ("1.40.0", "1.41.0", "1.42.0", "1.47.3", "1.51.0")}
    assert answers == {"1.40.0": True, "1.41.0": False, "1.42.0": True, "1.47.3": True, "1.51.0": True}


def test_the_past_commit_sample_replays_past_the_commit_position_until_1_50(past_commit):
    check = parse_check("no_replay_past_commit")
    answers = {v: check.evaluate(traced(past_commit, v)) for v in ("1.47.3", "1.49.1", "1.50.0", "1.51.0")}
    assert answers == {"1.47.3": False, "1.49.1": False, "1.50.0": True, "1.51.0": True}


def test_cluster_replay_under_1_47_3_reproduces_the_simulated_leaders(graceful):
    summary = json.loads((GRACEFUL / "summary.json").read_text())
    records = traced(graceful, "1.47.3")
    role, closed = {}, []
    for r in records:
        if r["kind"] == "role":
            role[r["node"]] = r["to"]
        if r["kind"] == "state" and r["to"] == "CLOSED" and role.get(r["node"]) == "LEADER":
            closed.append((r["node"], r["leadershipTermId"]))
    assert closed == [(leader["memberId"], leader["leadershipTermId"]) for leader in summary["leaders"]]


# == bisect ============================================================================================================


def test_bisect_finds_1_41_0_where_the_graceful_close_election_became_slow(graceful):
    report = bisect(graceful, good="1.40.0", bad="1.41.0", check=parse_check("leader_elected_within(5s)"))
    assert (report["firstChanged"], report["previous"], report["direction"]) == ("1.41.0", "1.40.0", "broke")
    assert "canvass_deadline_from_leader_update" in [f["flag"] for f in report["flagsChanged"]]
    assert report["firstDifference"] is not None


def test_bisect_finds_1_42_0_where_the_graceful_close_slowdown_was_fixed(graceful):
    report = bisect(graceful, good="1.47.3", bad="1.41.0", check=parse_check("leader_elected_within(5s)"))
    assert (report["firstChanged"], report["previous"], report["direction"]) == ("1.42.0", "1.41.7", "fixed")
    # 1.41.7 has two 1.43.0 changes backported (1.41.5) that 1.42.0 lacks; they turn off on the way.
    assert [(f["flag"], f["to"]) for f in report["flagsChanged"]] == [
        ("graceful_leader_close_detection", True), ("worse_log_vote_keeps_state", False),
        ("leader_role_from_log_replication", False)]
    assert report["confidence"]["1.41.7"]["level"] == "checked"
    assert {t["version"]: t["confidence"] for t in report["trials"]}["1.47.3"] == "checked"
    # The first difference is now the earlier LEADER role of 1.41.7 (at LEADER_LOG_REPLICATION), not the close.
    first = report["firstDifference"]
    assert first is not None and first["ts"] < 3_000 * MS + graceful.events[0].ts


def test_bisect_finds_1_50_0_where_follower_replay_stopped_at_the_commit_position(past_commit):
    report = bisect(past_commit, good="1.51.0", bad="1.40.0", check=parse_check("no_replay_past_commit"))
    assert report["firstChanged"] == "1.50.0" and report["previous"] == "1.49.1"
    assert "follower_replay_bounded_by_commit" in [f["flag"] for f in report["flagsChanged"]]
    changes = {c["key"]: (c["a"], c["b"]) for c in report["firstDifference"]["changes"]}
    assert changes["fields.commitPosition"][0] is None  # 1.50.0's NewLeadershipTerm carries it, 1.49.1's does not
    reused = [t for t in report["trials"] if "sameFlagsAs" in t]
    assert all(t["result"] == next(u["result"] for u in report["trials"] if u["version"] == t["sameFlagsAs"]) for t in reused)


def test_bisect_refuses_ends_that_answer_the_same(graceful):
    with pytest.raises(BisectError, match="the check is false on --good 1.41.0"):
        bisect(graceful, good="1.41.0", bad="1.47.3", check=parse_check("leader_elected_within(5s)"))
    with pytest.raises(BisectError, match="not among the releases"):
        bisect(graceful, good="1.39.0", bad="1.47.3", check=parse_check("leader_elected"))


def test_bisect_json_is_the_same_in_two_processes_with_different_hash_seeds():
    argv = [sys.executable, "-m", "cli", "bisect", str(GRACEFUL / "incident.arrow"), "--good", "1.47.3", "--bad", "1.41.0",
            "--check", "leader_elected_within(5s)", "--json"]
    outputs = []
    for hash_seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["firstChanged"] == "1.42.0"


def test_recount_bisect_reports_a_bad_check_or_release_in_one_line_with_exit_2(capsys):
    file = str(GRACEFUL / "incident.arrow")
    assert run(["bisect", file, "--good", "1.47.3", "--bad", "1.41.0", "--check", "leader_elected_within(5s"]) == 2
    assert capsys.readouterr().err.strip() == "recount: check: column 25: expected ')', got the end"
    assert run(["bisect", file, "--good", "9.9.9", "--bad", "1.41.0", "--check", "leader_elected"]) == 2
    assert "not among the releases" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ('node[7].electionState == "CLOSED"', "check: no member 7 in this replay (members: 0, 1, 2)"),
        ('node[1].electionStat == "CLOSED"', "check: node[1].electionStat: no such field (fields: electionState, role,"),
        ('node[1].electionState == "CLOSD"', "check: 'CLOSD' is not a value of electionState (INIT, CANVASS,"),
        ('"FOLOWER" != node[0].role', "check: 'FOLOWER' is not a value of role (FOLLOWER, CANDIDATE, LEADER)"),
        ('state_reached(1, "LEADR")', "check: 'LEADR' is not an election state"),
        ("state_reached(5, \"CLOSED\")", "check: no member 5 in this replay"),
    ],
)
def test_a_check_naming_what_the_replay_cannot_have_is_refused_before_any_replay(check, message, capsys):
    # Such a check is false on every release, which bisect used to report as "false on --good".
    file = str(GRACEFUL / "incident.arrow")
    assert run(["bisect", file, "--good", "1.47.3", "--bad", "1.41.0", "--check", check]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and len(captured.err.strip().splitlines()) == 1
    assert "1.47.3:" not in captured.err  # no version was tried


def test_recount_bisect_prints_the_release_the_flags_and_the_first_difference(capsys):
    assert run(["bisect", str(REPLAY / "incident.arrow"), "--bad", "1.49.1", "--good", "1.50.0",
                "--check", "no_replay_past_commit"]) == 0
    out = capsys.readouterr().out
    assert "1.50.0 is the first release where the check changes" in out
    assert "follower_replay_bounded_by_commit" in out and "fields.commitPosition" in out


# == the check language ===============================================================================================


def _summary(**nodes: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "summary", "ts": 20 * 10**9, "node": None, "nodes": nodes, "divergences": 0}


def test_checks_combine_predicates_and_summary_comparisons():
    records = [
        {"kind": "role", "ts": 10, "node": 0, "from": "FOLLOWER", "to": "LEADER"},
        {"kind": "state", "ts": 20, "node": 0, "from": "LEADER_READY", "to": "CLOSED"},
        _summary(**{"0": {"electionState": "CLOSED", "role": "LEADER", "leadershipTermId": 3},
                    "2": {"electionState": "CANVASS", "role": "FOLLOWER", "leadershipTermId": 2}}),
    ]
    assert parse_check('node[0].role == "LEADER" and node[2].electionState != "CLOSED"').evaluate(records)
    assert parse_check("leader_elected and not no_invariant_violations or max_term() >= 3").evaluate(records)
    assert not parse_check("node[2].leadershipTermId > 2").evaluate(records)
    assert not parse_check("node[7].leadershipTermId > 2").evaluate(records)  # a missing member is null
    assert parse_check("node[7].role == null").evaluate(records)
    assert parse_check("leader_elections() == 1 and invariant_violations() == 0").evaluate(records)
    assert parse_check('state_reached(0, "CLOSED") and not state_reached(1, "CLOSED")').evaluate(records)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "expected a check, got the end"),
        ("leader_elected_within()", "expected leader_elected_within(a duration)"),
        ("node[x].role", "expected a member id"),
        ("node[0].role", "expected a comparison operator"),
        ("__import__('os').system('true')", "unexpected \"'\""),
        ("open(1)", "unknown name 'open'"),
        ("leader_elected ==", "expected a predicate, a value or '('"),
        ("1 == leader_elected", "must be a value, not the predicate"),
    ],
)
def test_a_check_that_does_not_parse_names_the_column_and_what_was_expected(text, message):
    with pytest.raises(CheckError) as error:
        parse_check(text)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_leaderless_stretches_run_from_losing_a_leader_to_establishing_the_next():
    def r(kind: str, ts: int, node: int, **fields: Any) -> dict[str, Any]:
        return {"kind": kind, "ts": ts, "node": node, **fields}

    records = [
        r("state", 0, 0, **{"from": "INIT", "to": "CANVASS"}),
        r("role", 100, 0, **{"from": "CANDIDATE", "to": "LEADER"}),
        r("state", 300, 0, **{"from": "LEADER_READY", "to": "CLOSED"}),  # 300 ns without a leader
        r("state", 350, 1, **{"from": "INIT", "to": "CANVASS"}),  # one member of three: the leader stays
        r("input", 1_000, 0, type="MemberStop", fields={}),  # the leader goes: a stretch starts
        r("role", 1_500, 2, **{"from": "CANDIDATE", "to": "LEADER"}),
        r("state", 1_700, 2, **{"from": "LEADER_READY", "to": "CLOSED"}),  # 700 ns
        r("state", 2_000, 2, **{"from": "CLOSED", "to": "INIT"}),  # the leader starts an election
    ]
    assert leaderless_stretches(records, {"ts": 2_500, "nodes": {"0": {}, "1": {}, "2": {}}}) == [300, 700, 500]
    summary = _summary(**{"0": {}, "1": {}, "2": {}})
    summary["ts"] = 2_500
    assert parse_check("leader_elected_within(700ns)").evaluate(records + [summary])
    assert not parse_check("leader_elected_within(699ns)").evaluate(records + [summary])
    assert parse_check("longest_leaderless() == 700ns").evaluate(records + [summary])


def test_no_replay_past_commit_compares_a_replay_with_the_commit_announced_before_it():
    commit = {"kind": "send", "ts": 5, "node": 2, "peer": 0, "type": "CommitPosition", "fields": {"logPosition": 2048}}
    within = {"kind": "state", "ts": 9, "node": 0, "from": "FOLLOWER_REPLAY", "to": "FOLLOWER_LOG_INIT", "logPosition": 2048}
    past = dict(within, logPosition=4096)
    check = parse_check("no_replay_past_commit")
    assert check.evaluate([commit, within])
    assert not check.evaluate([commit, past])
    announced = {"kind": "send", "ts": 6, "node": 2, "peer": 0, "type": "NewLeadershipTerm", "fields": {"commitPosition": 4096}}
    assert check.evaluate([commit, announced, past])


# == diff ==============================================================================================================


def _send(ts: int, node: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "send", "ts": ts, "node": node, "peer": 1 - node, "channel": "consensus", "type": kind, "fields": fields}


def test_identical_traces_are_identical_and_repeated_heartbeats_fold_into_one():
    trace = [_send(t * MS, 0, "CommitPosition", leadershipTermId=0, logPosition=96, leaderMemberId=0) for t in range(5)]
    longer = trace + [_send(9 * MS, 0, "CommitPosition", leadershipTermId=0, logPosition=96, leaderMemberId=0)]
    assert len(member_behaviour(longer)[0]) == 1
    document = diff_traces(Side("a", trace), Side("b", longer), tolerance_ns=0)
    assert document["identical"] and document["firstDivergence"] is None


def test_the_first_divergence_names_the_member_both_records_what_differs_and_each_members_state():
    state = {"kind": "state", "ts": 1 * MS, "node": 0, "from": "INIT", "to": "CANVASS", "leadershipTermId": -1,
             "logLeadershipTermId": -1, "candidateTermId": -1, "leaderId": -1, "logPosition": 0, "appendPosition": 0}
    a = [state, _send(2 * MS, 0, "Vote", candidateTermId=1, vote="TRUE"), _send(3 * MS, 1, "Vote", candidateTermId=1, vote="TRUE")]
    b = [state, _send(2 * MS, 0, "Vote", candidateTermId=1, vote="FALSE"), _send(3 * MS, 1, "Vote", candidateTermId=1, vote="FALSE")]
    document = diff_traces(Side("a", a), Side("b", b))
    first = document["firstDivergence"]
    assert (first["ts"], first["node"], first["op"]) == (2 * MS, 0, "replace")
    assert first["changes"] == [{"key": "fields.vote", "a": "TRUE", "b": "FALSE"}]
    assert first["stateA"]["0"]["electionState"] == "CANVASS"
    assert document["summary"]["differences"] == 2


def test_records_equal_but_for_their_time_differ_only_beyond_the_tolerance():
    a = [{"kind": "state", "ts": 10 * MS, "node": 0, "from": "CANVASS", "to": "NOMINATE"}]
    b = [{"kind": "state", "ts": 13 * MS, "node": 0, "from": "CANVASS", "to": "NOMINATE"}]
    assert diff_traces(Side("a", a), Side("b", b), tolerance_ns=5 * MS)["identical"]
    late = diff_traces(Side("a", a), Side("b", b), tolerance_ns=1 * MS)
    assert late["firstDivergence"]["op"] == "timing" and late["differences"][0]["deltaNs"] == 3 * MS


def test_recount_diff_of_one_file_under_two_releases_shows_where_they_part(capsys):
    assert run(["diff", str(GRACEFUL / "incident.arrow"), "--model", "1.41.0", "--model", "1.42.0", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    first = document["firstDivergence"]
    assert document["a"]["model"] == "1.41.0" and document["b"]["model"] == "1.42.0"
    assert not document["identical"] and first["ts"] >= GRACEFUL_STOP_NS
    assert any(d["field"] == "logPosition" or d["field"] == "appendPosition" or d["field"] == "leadershipTermId"
               for d in document["summary"]["finalStateDifferences"]) or document["summary"]["differences"] > 0


GRACEFUL_STOP_NS = 1772366400000000000 + 3_000 * MS


def test_recount_diff_compares_trace_files_and_repeats_itself_exactly(tmp_path, capsys):
    paths = []
    for model in ("1.49.1", "1.50.0"):
        assert run(["replay", str(REPLAY / "incident.arrow"), "--mode", "cluster", "--model", model, "--json"]) == 0
        path = tmp_path / f"{model}.jsonl"
        path.write_text(capsys.readouterr().out, encoding="utf-8")
        paths.append(str(path))
    assert run(["diff", *paths, "--json"]) == 0
    first = capsys.readouterr().out
    assert run(["diff", *paths, "--json"]) == 0
    assert capsys.readouterr().out == first
    document = json.loads(first)
    assert document["a"]["kind"] == "trace" and document["b"]["model"] == "1.50.0"
    assert document["firstDivergence"]["node"] == 2  # the leader's first NewLeadershipTerm already differs


def test_recount_diff_refuses_a_model_for_a_trace_and_a_missing_second_side(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"kind":"summary","ts":0,"node":null,"nodes":{}}\n', encoding="utf-8")
    assert run(["diff", str(trace), str(trace), "--model", "1.47.3"]) == 2
    assert "is a trace already" in capsys.readouterr().err
    assert run(["diff", str(GRACEFUL / "incident.arrow")]) == 2
    assert "give two models" in capsys.readouterr().err


def test_recount_diff_json_is_the_same_in_two_processes_with_different_hash_seeds():
    argv = [sys.executable, "-m", "cli", "diff", str(REPLAY / "incident.arrow"), "--model", "1.47.3", "--model", "1.50.0"]
    outputs = []
    for hash_seed in ("7", "31337"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([*argv, "--json"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and json.loads(outputs[0])["firstDivergence"] is not None
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "first divergence" in done.stdout


# == export-scenario ===================================================================================================


def _runs_in_the_scenario_runner(text: str, tmp_path: Path) -> None:
    from tests.test_scenarios import run_file

    path = tmp_path / "exported.txt"
    path.write_text(text, encoding="utf-8")
    stanzas, actual = run_file(path)
    for stanza, lines in zip(stanzas, actual, strict=True):
        assert lines == stanza.expected, f"line {stanza.line}: {stanza.commands}"


def test_an_exported_scenario_passes_the_scenario_runner_and_ends_in_the_replays_outcome(tmp_path):
    loaded = loader.load(SAMPLES / "clean-start" / "incident.arrow")
    exported = export_scenario(loaded.events, window=parse_window("..400ms"), minimise=False, source="clean-start")
    _runs_in_the_scenario_runner(exported.text, tmp_path)
    assert exported.outcome[2].startswith("2 CLOSED LEADER term=0")
    assert exported.kept == exported.deliveries


def test_minimising_drops_deliveries_that_do_not_change_the_outcome_within_the_budget(tmp_path):
    loaded = loader.load(SAMPLES / "clean-start" / "incident.arrow")
    full = export_scenario(loaded.events, window=parse_window("..400ms"), minimise=False)
    small = export_scenario(loaded.events, window=parse_window("..400ms"), budget=40)
    assert small.outcome == full.outcome
    assert small.kept < small.deliveries and small.runs <= 40
    _runs_in_the_scenario_runner(small.text, tmp_path)
    again = export_scenario(loaded.events, window=parse_window("..400ms"), budget=40)
    assert again.text == small.text


def test_a_window_after_the_start_begins_members_from_their_files_then(tmp_path):
    loaded = loader.load(REPLAY / "incident.arrow")
    exported = export_scenario(loaded.events, window=parse_window("5s..6s"), nodes=[0, 2], budget=10)
    starts = [line for line in exported.text.split("\n") if line.startswith(("start", "restart"))]
    assert starts == ["start 0 candidateTermId=0 log=0:0:-1 append=4448", "start 2 candidateTermId=0 log=0:0:-1 append=4448",
                      "restart 0"]
    _runs_in_the_scenario_runner(exported.text, tmp_path)


def test_recount_export_scenario_writes_the_file_and_refuses_to_overwrite_it(tmp_path, capsys):
    out = tmp_path / "issue.txt"
    argv = ["export-scenario", str(SAMPLES / "clean-start" / "incident.arrow"), "--window", "..300ms", "-o", str(out),
            "--budget", "5", "--json"]
    assert run(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert out.read_text(encoding="utf-8").startswith("# Exported by `recount export-scenario`")
    assert document["runs"] <= 5 and document["members"] == [0, 1, 2]
    assert run(argv) == 2
    assert "exists (use --force" in capsys.readouterr().err
    assert run(["export-scenario", str(SAMPLES / "clean-start" / "incident.arrow"), "--window", "3s", "-o",
                str(tmp_path / "x.txt")]) == 2
    assert "expected START..END" in capsys.readouterr().err


def test_durations_are_written_in_the_largest_unit_that_divides_them():
    assert [format_duration(n) for n in (2_000_000_000, 5 * MS, 7_000, 123)] == ["2s", "5ms", "7us", "123ns"]


def test_cluster_replay_of_the_real_capture_elects_the_member_that_nominated_in_it(capture, tmp_path):
    from recorder.convert import convert

    out = tmp_path / "real.arrow"
    convert([capture / "capture.pcapng", capture / "node0", capture / "node1", capture / "node2"], out)
    records = traced(loader.load(out), "1.47.3")
    # Member 1 sent the only RequestVote in the capture: the unseeded members draw accordingly.  Each
    # member starts where the wire shows its election beginning (its first CanvassPosition), so member
    # 1's recorded nomination is within its draw's reach ("recorded", not "recorded-late").
    sources = {r["node"]: r["source"] for r in records if r["kind"] == "random"}
    assert sources == {0: "latest", 1: "recorded", 2: "latest"}
    assert records[-1]["nodes"]["1"]["role"] == "LEADER" and records[-1]["nodes"]["1"]["leadershipTermId"] == 0
