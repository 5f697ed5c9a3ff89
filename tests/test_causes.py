"""Every state change, role change, election start and file write carries its cause (engine.model.outputs.Cause):
the message the member was handling, the local event, or the deadline that fell due."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.harness.clock import Clock
from engine.replay import replay
from engine.scenario import World, run_command
from formats import replay_file

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CAUSED = {"state", "role", "moduleState", "election", "nodeState", "markFile", "recordingLog"}


def _record(*commands: str):
    world = World(recording=[])
    for command in commands:
        run_command(world, command)
    return world.recording


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.iterdir() if (p / "incident.arrow").exists()))
def test_every_change_names_a_cause_and_a_message_cause_is_an_input_the_member_received_then(sample):
    events, _ = replay_file.read_events((SAMPLES / sample / "incident.arrow").read_bytes())
    received = {(e.node, e.ts, e.type, e.peer) for e in events if e.dir == "in"}
    local = {(e.node, e.ts, e.type) for e in events if e.dir == "local"}
    records = [r for r in replay(events) if r["kind"] in CAUSED]
    assert records
    for r in records:
        cause = r["cause"]
        assert list(r)[-1] == "cause"  # the new key comes last: the rest of each line is as before
        if cause["kind"] == "message" and cause.get("channel") == "consensus":
            assert (r["node"], r["ts"], cause["type"], cause.get("peer")) in received, r
        elif cause["kind"] == "local" and cause["type"] != "OwnLogAppend":
            assert (r["node"], r["ts"], cause["type"]) in local, r
        else:
            assert cause["kind"] in ("timer", "message", "local"), r


def test_a_follower_that_loses_its_leader_starts_an_election_on_its_leader_heartbeat_timeout():
    records = list(replay(_record("cluster 3 delays=0:300ms/150ms,1:100ms,2:200ms/250ms", "advance 1s",
                                  "crash 1", "advance 12s")))
    started = [r for r in records if r["kind"] == "election" and r["reason"] == "leader heartbeat timeout"]
    assert started and all(r["cause"] == {"kind": "timer", "type": "leaderHeartbeatTimeout"} for r in started)
    boot = [r for r in records if r["kind"] == "election" and r["reason"] == "node started"]
    assert boot and all(r["cause"] == {"kind": "local", "type": "MemberStart"} for r in boot)


def test_a_vote_request_puts_a_canvassing_member_into_follower_ballot_and_its_nomination_deadline_makes_a_candidate():
    records = list(replay(_record("cluster 3 delays=0:300ms,1:100ms,2:200ms", "advance 2s")))
    ballots = [r for r in records if r["kind"] == "state" and r["to"] == "FOLLOWER_BALLOT"]
    assert ballots
    for r in ballots:
        assert r["cause"]["kind"] == "message" and r["cause"]["type"] == "RequestVote"
        assert r["cause"]["peer"] != r["node"]
    candidates = [r for r in records if r["kind"] == "state" and r["to"] == "CANDIDATE_BALLOT"]
    assert candidates and all(r["cause"] == {"kind": "timer", "type": "nomination"} for r in candidates)
    writes = [r for r in records if r["kind"] == "nodeState"]
    assert writes and {r["cause"]["type"] for r in writes} <= {"nomination", "RequestVote"}


def test_the_clock_drops_cancelled_actions_in_bulk_without_changing_what_runs_or_in_which_order():
    ran: list[int] = []
    clock = Clock()
    keep = []
    for i in range(2000):  # a wakeup moved on at every input, as a member's is
        timer = clock.at(10_000 + i % 7, ran.append, i)
        if i % 10:
            timer.cancel()
        else:
            keep.append(i)
    assert len(clock._queue) < 600  # compacted along the way (2000 pushed, 200 live)
    clock.run_until(20_000)
    assert ran == sorted(keep, key=lambda i: (10_000 + i % 7, i))
