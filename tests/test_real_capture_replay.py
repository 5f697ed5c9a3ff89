"""The real Aeron 1.47.3 capture, converted and replayed end to end, and cluster config given at convert.

The capture (pcapng and the three agent logs) is converted as a user would, then node-replayed: no
divergence, no invariant broken, and each member goes through exactly the ELECTION_STATE_CHANGEs its
own agent log shows.  The leader's log appends (client sessions, timers, the operator's snapshot) are
in the replay as ``out`` log events taken from its frames to the followers, and the replayed leader
appends exactly those, so its CommitPositions follow the real ones to the end.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from cli.app import run
from engine.harness.events import input_of, member_start_of
from engine.model.javarandom import JavaRandom
from engine.model.node import Node
from engine.replay import replay
from formats.agent_log import AgentLogRecord, read_agent_log
from formats.cluster_codecs import SessionMessageHeader, TimerEvent
from formats.events import Event, message_event
from formats.replay_file import read_events

ROOT = Path(__file__).resolve().parents[1]
#: From the capture's README (`aeron.cluster.members` of the real cluster).
MEMBERS = (
    "0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
    "1,127.0.0.1:20102,127.0.0.1:20103,127.0.0.1:20104,127.0.0.1:20105,127.0.0.1:20101|"
    "2,127.0.0.1:20202,127.0.0.1:20203,127.0.0.1:20204,127.0.0.1:20205,127.0.0.1:20201"
)
LEADER = 1
SECOND = 1_000_000_000


def _inputs(capture: Path) -> list[str]:
    return [str(capture / "capture.pcapng"), *(str(capture / f"node{n}" / "agent-events.log") for n in (0, 1, 2))]


@pytest.fixture(scope="module")
def converted(capture: Path, tmp_path_factory) -> list[Event]:
    out = tmp_path_factory.mktemp("real") / "real.arrow"
    # The README's timeouts are Aeron's defaults; giving them checks that --config reaches the replay.
    config = ["--config", "aeron.cluster.leader.heartbeat.timeout=10s", "--config", "aeron.cluster.election.timeout=1s"]
    assert run(["convert", *_inputs(capture), "--members", MEMBERS, *config, "-o", str(out)]) == 0
    events, _ = read_events(pa.memory_map(str(out)))
    return events


@pytest.fixture(scope="module")
def records(converted: list[Event]) -> list[dict]:
    return list(replay(converted))


def test_the_real_capture_replays_with_zero_divergences_and_no_broken_invariant(records):
    summary = records[-1]
    assert summary["kind"] == "summary"
    assert [r for r in records if r["kind"] in ("divergence", "invariant")] == []
    assert summary["divergences"] == 0


def test_every_member_replays_the_election_states_its_agent_log_shows(capture: Path, records):
    for member_id in (0, 1, 2):
        text = (capture / f"node{member_id}" / "agent-events.log").read_text()
        logged = [(r.fields["from"], r.fields["to"]) for r in read_agent_log(text).records
                  if type(r) is AgentLogRecord and r.event == "ELECTION_STATE_CHANGE"]
        replayed = [(r["from"], r["to"]) for r in records if r["kind"] == "state" and r["node"] == member_id]
        assert logged and replayed == logged, f"member {member_id}"


def test_the_leaders_appends_are_out_events_matching_what_each_follower_received(converted):
    sent = sorted((e.peer, e.extra["logPosition"], e.type, e.payload) for e in converted
                  if e.dir == "out" and e.channel == "log" and e.node == LEADER)
    received = sorted((e.node, e.extra["logPosition"], e.type, e.payload) for e in converted
                      if e.dir == "in" and e.channel == "log")
    assert sent == received
    assert {t for _, _, t, _ in sent} >= {"TimerEvent", "SessionCloseEvent", "ClusterActionRequest"}


def test_the_replayed_leader_appends_the_recorded_frames_and_commits_where_the_real_one_did(converted, records):
    appended = [r["position"] for r in records if r["kind"] == "logAppend" and r["node"] == LEADER]
    recorded = sorted({e.extra["logPosition"] for e in converted
                       if e.dir == "out" and e.channel == "log" and e.node == LEADER})
    assert appended == recorded
    last_commit = max(e.fields["logPosition"] for e in converted
                      if e.dir == "out" and e.type == "CommitPosition" and e.node == LEADER)
    assert records[-1]["nodes"][str(LEADER)]["commitPosition"] == last_commit == recorded[-1]


def test_config_given_at_convert_is_in_every_members_start(converted):
    starts = [e for e in converted if e.type == "MemberStart"]
    assert sorted(e.node for e in starts) == [0, 1, 2]
    for start in starts:
        assert dict(start.fields["config"]) == {
            "aeron.cluster.election.timeout": SECOND,
            "aeron.cluster.leader.heartbeat.timeout": 10 * SECOND,
        }


# --- the engine's side of log evidence, and --config on its own -------------------------------------


def _leader_of_one(evidence: bool) -> Node:
    start = Event(ts=SECOND, node=0, dir="local", peer=None, channel="local", type="MemberStart",
                  fields={"clusterMembers": "0,h:1,h:2,h:3,h:4,h:5"})
    node = Node(0, member_start_of(start), random=JavaRandom(0))
    if evidence:
        node.expect_log_evidence()
    node.advance(2 * SECOND)
    node.take_outputs()
    assert node.view().to_json()["role"] == "LEADER" and node.view().to_json()["appendPosition"] == 96
    return node


def test_a_leader_with_log_evidence_appends_what_it_shows_and_nothing_for_ingress():
    ingress = message_event(SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=0),
                            ts=2 * SECOND, node=0, dir="in", peer=None, channel="ingress")
    without = _leader_of_one(evidence=False)
    without.step(input_of(ingress), 2 * SECOND)
    assert [o.to_json()["position"] for o in without.take_outputs()] == [160]

    node = _leader_of_one(evidence=True)
    node.step(input_of(ingress), 2 * SECOND)
    assert not node.take_outputs() and node.view().to_json()["appendPosition"] == 96
    timer = message_event(TimerEvent(leadership_term_id=0, correlation_id=7, timestamp=2001),
                          ts=2 * SECOND + 1_000_000, node=0, dir="out", peer=None, channel="log")
    node.step(input_of(dataclasses.replace(timer, extra={"logPosition": 160})), timer.ts)
    appends = [o.to_json() for o in node.take_outputs() if o.to_json()["kind"] == "logAppend"]
    assert [(a["type"], a["position"]) for a in appends] == [("TimerEvent", 160)]
    # Evidence of what the log already holds (the election's own NewLeadershipTermEvent) is not appended again.
    node.step(input_of(dataclasses.replace(timer, ts=timer.ts + 1_000_000, extra={"logPosition": 96})), timer.ts + 1_000_000)
    assert node.view().to_json()["appendPosition"] == 160 and node.view().to_json()["commitPosition"] == 160


def test_a_bad_config_property_is_refused_in_one_line_with_exit_2_before_reading_anything(tmp_path):
    out = tmp_path / "x.arrow"
    done = subprocess.run(
        [sys.executable, "-m", "cli", "convert", str(tmp_path / "missing.jsonl"), "-o", str(out),
         "--config", "aeron.cluster.leader.heartbeat.timout=2s"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "aeron.cluster.leader.heartbeat.timout" in done.stderr and not out.exists()


@pytest.mark.parametrize("option", ["aeron.cluster.election.timeout=soon", "aeron.cluster.election.timeout", "=1s"])
def test_a_malformed_config_option_is_a_usage_error(tmp_path, capsys, option):
    assert run(["convert", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x.arrow"), "--config", option]) == 2
    assert "--config" in capsys.readouterr().err


def test_config_sets_every_member_start_of_a_jsonl_capture_over_its_own(tmp_path):
    events = [
        {"ts": 0, "node": n, "dir": "local", "peer": None, "channel": "local", "type": "MemberStart",
         "fields": {"clusterMembers": "0,h:1,h:2,h:3,h:4,h:5|1,i:1,i:2,i:3,i:4,i:5",
                    "config": {"aeron.cluster.election.timeout": "3s", "aeron.cluster.service.count": 2}}}
        for n in (0, 1)
    ]
    source = tmp_path / "c.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "c.arrow"
    assert run(["convert", str(source), "-o", str(out), "--config", "aeron.cluster.election.timeout=500ms"]) == 0
    converted, _ = read_events(pa.memory_map(str(out)))
    configs = [member_start_of(e).config for e in converted if e.type == "MemberStart"]
    assert [(c.election_timeout_ns, c.service_count) for c in configs] == [(500_000_000, 2)] * 2
