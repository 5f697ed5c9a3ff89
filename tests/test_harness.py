"""The one cluster driver (engine.harness): its clock's order, its checkpoints, the router, the edge
from capture rows to typed inputs, and what the model hands it (Ready, draws, views)."""

from __future__ import annotations

import pytest

from engine.harness.clock import Clock
from engine.harness.events import input_of
from engine.harness.router import LinkRouter
from engine.model.inputs import ConsensusMessage, End, LogFrame, MemberCrash, OwnLogAppend
from engine.model.outputs import NominationDraw, Send, StateChange
from engine.replay import NodeReplay, scan
from engine.scenario import World, run_command
from formats.cluster_codecs import CommitPosition, RequestVote
from formats.events import Event

MS = 1_000_000


def test_at_one_instant_member_timers_run_first_in_member_order_then_actions_in_schedule_order():
    clock = Clock()
    ran = []
    clock.at(5, ran.append, "action a")
    clock.member_timer(5, 2, ran.append, "timer of member 2")
    clock.at(5, ran.append, "action b")
    clock.member_timer(5, 0, ran.append, "timer of member 0")
    clock.at(4, ran.append, "earlier action")
    clock.run_until(5)
    assert ran == ["earlier action", "timer of member 0", "timer of member 2", "action a", "action b"]
    assert clock.now_ns == 5


def test_the_clock_refuses_the_past_and_skips_what_was_cancelled():
    clock = Clock(100)
    with pytest.raises(ValueError, match="already at 100"):
        clock.at(99, print)
    ran = []
    timer = clock.at(150, ran.append, "cancelled")
    clock.at(150, ran.append, "kept")
    timer.cancel()
    assert clock.pending() == 1
    clock.run_until(200)
    assert ran == ["kept"] and clock.now_ns == 200


def test_a_restored_driver_checkpoint_runs_the_same_election_again():
    world = World()
    run_command(world, "cluster 3 delays=0:300ms,1:350ms,2:400ms")
    run_command(world, "advance 150ms")
    checkpoint = world.driver.checkpoint(keep=(world,))
    first = run_command(world, "advance 2s")
    assert any("LEADER_READY → CLOSED" in line for line in first)  # the election ran to its end
    world.driver.restore(checkpoint, keep=(world,))
    assert world.now == checkpoint.now_ns
    assert run_command(world, "advance 2s") == first


def test_a_comparison_free_node_replay_checkpoint_rebuilds_exactly_the_same_members():
    world = World(recording=[])
    run_command(world, "cluster 3 delays=0:300ms,1:350ms,2:400ms")
    run_command(world, "advance 3s")
    events = sorted(world.recording, key=lambda e: e.ts)
    full = NodeReplay(scan(events))
    half = len(events) // 2
    for k, event in enumerate(events[:half]):
        full.feed(event, k, "seq")
    light = NodeReplay.restore(full.checkpoint(compare=False))
    assert light.views() == full.views()
    for k, event in enumerate(events[half:], start=half):
        full.feed(event, k, "seq")
        assert light.feed(event, k, "seq") is not None
    assert light.views() == full.views()
    assert light.divergences == 0 and not light.checks  # it compares nothing


def test_a_nomination_draw_is_an_output_just_before_the_nominate_state_change():
    world = World()
    captured = []
    shown = world.driver.on_ready

    def keep(member_id, ready):
        captured.extend(ready)
        shown(member_id, ready)

    world.driver.on_ready = keep
    lines = run_command(world, "cluster 3 delays=0:300ms,1:350ms,2:400ms")
    lines += run_command(world, "advance 350ms")
    draws = [i for i, line in enumerate(lines) if "nomination delay" in line]
    assert sorted(lines[i].split()[1:] for i in draws) == [
        ["0", "nomination", "delay", "300ms"], ["1", "nomination", "delay", "350ms"], ["2", "nomination", "delay", "400ms"]]
    assert all("CANVASS → NOMINATE" in lines[i + 1] for i in draws)
    typed = [o for o in captured if type(o) in (NominationDraw, StateChange)]
    for i, output in enumerate(typed):
        if type(output) is NominationDraw:
            after = typed[i + 1]
            assert (after.node, after.from_state, after.to_state) == (output.node, "CANVASS", "NOMINATE")
            assert output.source == "scripted" and output.delay_ns == (300 + 50 * output.node) * MS


def _event(direction, channel, kind, **extra):
    fields = extra.pop("fields", {})
    return Event(ts=0, node=0, dir=direction, peer=extra.pop("peer", None), channel=channel, type=kind, fields=fields,
                 extra=extra or None)


def test_capture_rows_become_typed_inputs_at_the_edge_and_the_rest_is_not_an_input():
    vote = {"logLeadershipTermId": 0, "logPosition": 0, "candidateTermId": 1, "candidateMemberId": 1, "protocolVersion": 1}
    commit = {"leadershipTermId": 0, "logPosition": 96, "leaderMemberId": 1}
    assert input_of(_event("in", "consensus", "RequestVote", peer=1, fields=vote)) == ConsensusMessage(
        message=RequestVote(log_leadership_term_id=0, log_position=0, candidate_term_id=1, candidate_member_id=1,
                            protocol_version=1), peer=1)
    frame = input_of(_event("in", "log", "CommitPosition", fields=commit, logPosition=96))
    assert type(frame) is LogFrame and frame.log_position == 96
    assert type(input_of(_event("out", "log", "CommitPosition", fields=commit))) is OwnLogAppend
    assert input_of(_event("local", "local", "MemberCrash")) == MemberCrash()
    assert input_of(_event("local", "local", "End")) == End()
    assert input_of(_event("out", "consensus", "CommitPosition", fields=commit)) is None  # what it sent
    assert input_of(_event("local", "local", "ElectionStateChange")) is None  # an observation
    assert input_of(_event("in", "egress", "SessionEvent")) is None


def test_a_node_refuses_a_capture_row_as_an_input():
    world = World()
    run_command(world, "start 0")
    with pytest.raises(TypeError, match="engine.model.inputs"):
        world.members[0].node.step(_event("local", "local", "MemberCrash"), 0)


def test_the_router_delays_each_link_and_drops_what_a_cut_separates_until_healed():
    arrived = []
    router = LinkRouter(lambda at, member, item, send: arrived.append((at, member, type(item).__name__)), [0, 1, 2],
                        delays={(0, 1): 3 * MS})
    message = CommitPosition(leadership_term_id=0, log_position=96, leader_member_id=0)

    def send(to):
        return Send(ts=10 * MS, node=0, peer=to, channel="consensus", message=message)

    assert router.route(send(1)) and router.route(send(2))
    assert arrived == [(13 * MS, 1, "ConsensusMessage"), (13 * MS, 2, "ConsensusMessage")]  # the median as default
    router.apply_fault({"fault": "isolate", "member": 2})
    router.apply_fault({"fault": "oneway", "from": 0, "to": 1})
    assert not router.route(send(2)) and not router.route(send(1))
    router.heal(["isolate 2"])
    assert router.route(send(2)) and not router.route(send(1))
    assert not router.route(Send(ts=0, node=0, peer=5, channel="consensus", message=message))  # not a member
