"""The Node driving API (engine-api.md): MemberStart validation, outputs in contract §3 form, inspect,
crash/stop/restart, evidence events, clone."""

from __future__ import annotations

import json

import pytest

from engine import JavaRandom, Node
from engine.harness.events import input_of, member_start_of
from formats.errors import DecodeError
from formats.events import Event, parse_jsonl
from tests.test_engine_cluster import SECOND, Cluster, elected, members
from tests.test_engine_election import One, canvass, kinds, request_vote, states

MS = 1_000_000


def start_event(**fields) -> Event:
    return Event(ts=0, node=0, dir="local", peer=None, channel="local", type="MemberStart", fields=fields)


def local(node: int, ts: int, kind: str, **fields) -> Event:
    return Event(ts=ts, node=node, dir="local", peer=None, channel="local", type=kind, fields=fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "clusterMembers"),
        ({"clusterMembers": "0,a,b,c"}, "invalid member value"),
        ({"clusterMembers": members(3), "nodeState": {"candidateTermId": "x"}}, "nodeState.candidateTermId"),
        ({"clusterMembers": members(3), "recordingLog": [{"leadershipTermId": 0}]}, "recordingLog"),
        ({"clusterMembers": members(3), "config": {"aeron.cluster.bogus": 1}}, "aeron.cluster.bogus"),
        ({"clusterMembers": members(3), "appendPosition": -5}, "appendPosition"),
        ({"clusterMembers": members(3), "seed": 1.5}, "seed"),
        ({"clusterMembers": members(3), "followerJoinsNs": [[5, 10, 20]]}, "followerJoinsNs"),
        ({"clusterMembers": members(3), "followerJoinsNs": [[5, 10, "x", None]]}, "followerJoinsNs"),
        ({"clusterMembers": members(3), "leaderJoinsReadyNs": [5, "x"]}, "leaderJoinsReadyNs"),
        ({"clusterMembers": members(3), "replicationPositionsNs": [[5]]}, "replicationPositionsNs"),
        ({"clusterMembers": members(3), "logReplaysDoneNs": [[5, "x"]]}, "logReplaysDoneNs"),
    ],
)
def test_a_malformed_member_start_is_a_decode_error_naming_the_field(fields, expected):
    with pytest.raises(DecodeError, match=expected):
        member_start_of(start_event(**fields), source="x.jsonl", line=3)


def test_a_member_start_error_names_the_file_and_line():
    with pytest.raises(DecodeError) as error:
        member_start_of(start_event(), source="x.jsonl", line=3)
    assert str(error.value).startswith("x.jsonl, line 3: MemberStart:")


def test_a_member_that_is_not_in_the_cluster_members_is_refused():
    with pytest.raises(DecodeError, match="member 7 is not in clusterMembers"):
        Node(7, member_start_of(start_event(clusterMembers=members(3))), random=JavaRandom(0))


def test_member_start_takes_the_inspect_node_state_shape_and_config_durations():
    start = member_start_of(start_event(
        clusterMembers=members(3),
        nodeState={"candidateTerm": {"candidateTermId": 4, "logPosition": 10, "timestamp": 9}},
        config={"aeron.cluster.election.timeout": "500ms"},
        seed=12,
    ))
    assert start.node_state == (4, 10, 9)
    assert start.config.election_timeout_ns == 500 * MS and start.seed == 12


def test_member_start_takes_each_follower_join_by_session_with_null_for_never():
    start = member_start_of(start_event(clusterMembers=members(3),
                                        followerJoinsNs=[[5, 10, 30, 20], [6, 40, None, None]]))
    assert start.follower_joins_ns == ((5, 10, 30, 20), (6, 40, None, None))


def test_member_start_takes_when_each_leader_join_was_over():
    start = member_start_of(start_event(clusterMembers=members(3), leaderJoinsReadyNs=[10, 40]))
    assert start.leader_joins_ready_ns == (10, 40)


def test_every_output_renders_as_its_contract_record():
    one = One(n=1)
    records = [o.to_json() for o in one.outputs]
    by_kind: dict = {}
    for record in records:
        by_kind.setdefault(record["kind"], record)  # the first of each kind
    assert set(by_kind) == {"election", "nodeState", "role", "state", "recordingLog", "moduleState", "logAppend"}
    for record in records:
        assert list(record)[:3] == ["kind", "ts", "node"]
        json.dumps(record)  # JSON-ready
    # A single member elects itself while starting: every change's cause is its MemberStart (the last key).
    started = {"kind": "local", "type": "MemberStart"}
    assert by_kind["election"] == {"kind": "election", "ts": 0, "node": 0, "reason": "node started",
                                   "leadershipTermId": -1, "logPosition": 0, "appendPosition": 0, "cause": started}
    assert by_kind["nodeState"] == {"kind": "nodeState", "ts": 0, "node": 0, "candidateTermId": 0, "logPosition": 0,
                                    "timestamp": 0, "cause": started}
    assert by_kind["role"] == {"kind": "role", "ts": 0, "node": 0, "from": "FOLLOWER", "to": "LEADER", "cause": started}
    assert {k: by_kind["state"][k] for k in ("from", "to", "reason")} == {"from": "INIT", "to": "LEADER_LOG_REPLICATION", "reason": ""}
    assert by_kind["recordingLog"]["op"] == "appendTerm" and by_kind["recordingLog"]["entry"]["leadershipTermId"] == 0
    assert by_kind["logAppend"]["position"] == 96 and by_kind["logAppend"]["type"] == "NewLeadershipTermEvent"


def test_a_send_renders_with_its_message_fields_by_aeron_name():
    one = One()
    record = kinds(one.outputs, "Send")[0].to_json()
    assert record == {"kind": "send", "ts": 0, "node": 0, "peer": 1, "channel": "consensus", "type": "CanvassPosition",
                      "fields": {"logLeadershipTermId": -1, "logPosition": 0, "leadershipTermId": -1,
                                 "followerMemberId": 0, "protocolVersion": 65536}}


def test_inspect_gives_the_state_the_inspector_and_the_summary_need():
    one = One()
    state = one.node.view().to_json()
    for key in ("electionState", "role", "moduleState", "leadershipTermId", "logLeadershipTermId", "candidateTermId",
                "leaderMemberId", "logPosition", "appendPosition", "commitPosition", "catchupJoinPosition", "deadlines",
                "members", "nodeState", "recordingLog"):
        assert key in state
    assert state["deadlines"]["canvass"] == 60 * SECOND
    assert [m["memberId"] for m in state["members"]] == [0, 1, 2]
    assert state["nodeState"]["candidateTerm"]["candidateTermId"] == -1
    json.dumps(state)


def test_a_crashed_member_does_nothing_more_and_a_restart_keeps_its_files():
    one = One()
    one.deliver(10, 1, request_vote(1, 3))
    one.node.step(input_of(local(0, 20 * MS, "MemberCrash")), 20 * MS)
    assert not one.node.is_running
    one.deliver(30, 1, canvass(1))
    assert one.advance(5_000) == []
    one.node.step(input_of(local(0, 6 * SECOND, "MemberStart", clusterMembers=members(3))), 6 * SECOND)
    out = one.take()
    assert one.node.is_running and states(out) == ["INIT→CANVASS"]
    assert one.node.view().to_json()["nodeState"]["candidateTerm"]["candidateTermId"] == 3


def test_a_clean_stop_closes_the_consensus_module():
    one = One()
    one.node.step(input_of(local(0, 10 * MS, "MemberStop")), 10 * MS)
    assert [o.describe() for o in one.take()] == ["0 module ACTIVE → CLOSED"]
    assert not one.node.is_running


def test_a_follower_whose_log_image_ends_with_end_of_stream_starts_an_election_that_skips_the_graceful_leader():
    cluster = elected()
    leader = cluster.leader()
    cluster.run(6 * SECOND)
    cluster.nodes[leader].step(input_of(local(leader, 6 * SECOND, "MemberStop")), 6 * SECOND)
    for follower in range(3):
        if follower != leader:
            cluster.nodes[follower].step(input_of(local(follower, 6 * SECOND, "LogEndOfStream")), 6 * SECOND)
            cluster._collect(follower)
    cluster.run(8 * SECOND)
    reasons = {e.reason for e in cluster.of("ElectionStarted", since_ns=6 * SECOND)}
    assert reasons == {"log disconnected from leader: eos=true"}
    new_leader = cluster.leader()
    assert new_leader != leader
    won = [c for c in cluster.of("StateChange", new_leader, since_ns=6 * SECOND) if c.to_state == "LEADER_LOG_REPLICATION"][0]
    assert won.ts < 6 * SECOND + 600 * MS  # unanimity without the old leader: no ballot timeout needed


def test_a_stop_signal_for_the_log_recording_starts_an_election():
    cluster = elected()
    follower = (cluster.leader() + 1) % 3
    cluster.run(6 * SECOND)
    recording_id = cluster.nodes[follower].view().to_json()["logRecordingId"]
    cluster.nodes[follower].step(input_of(local(follower, 6 * SECOND, "RecordingSignal", recordingId=recording_id, position=96,
                                       signal="STOP")), 6 * SECOND)
    cluster._collect(follower)
    assert [e.reason for e in cluster.of("ElectionStarted", follower, since_ns=6 * SECOND)] == ["log recording stopped: eos=false"]


def test_events_from_json_lines_drive_a_node():
    lines = [
        json.dumps({"ts": 0, "node": 0, "dir": "local", "peer": None, "channel": "local", "type": "MemberStart",
                    "fields": {"clusterMembers": members(3), "seed": 42}}),
        json.dumps({"ts": 5_000_000, "node": 0, "dir": "in", "peer": 1, "channel": "consensus", "type": "RequestVote",
                    "fields": {"logLeadershipTermId": -1, "logPosition": 0, "candidateTermId": 0, "candidateMemberId": 1,
                               "protocolVersion": 65536}}),
    ]
    events = list(parse_jsonl(lines))
    start = member_start_of(events[0])
    node = Node(0, start, random=JavaRandom(start.seed))
    node.step(input_of(events[1]), events[1].ts)
    assert node.view().to_json()["electionState"] == "FOLLOWER_BALLOT"


def test_a_clone_is_independent_of_its_original():
    cluster = Cluster()
    cluster.run(300 * MS)
    original = cluster.nodes[0]
    copy = original.clone()
    before = copy.view().to_json()
    cluster.run(3 * SECOND)
    assert copy.view().to_json() == before
    copy.advance(3 * SECOND)
    assert copy.take_outputs()  # it keeps its own timers


def test_a_follower_told_the_termination_position_acknowledges_it_and_closes_when_its_log_gets_there():
    from formats.cluster_codecs import TerminationPosition

    cluster = elected()
    leader = cluster.leader()
    follower = (leader + 1) % 3
    cluster.deliver(6 * SECOND, leader, follower, TerminationPosition(leadership_term_id=0, log_position=96))
    records = [o.describe() for o in cluster.outputs if o.node == follower and o.ts >= 6 * SECOND]
    assert records == [
        f"{follower} module ACTIVE → TERMINATING",
        f"{follower}→{leader} TerminationAck term=0 pos=96",
        f"{follower} module TERMINATING → CLOSED",
    ]
    assert not cluster.nodes[follower].is_running


def test_a_follower_meeting_a_snapshot_action_in_the_log_records_the_snapshots_in_recording_log():
    from formats.cluster_codecs import ClusterAction, ClusterActionRequest, CommitPosition

    cluster = elected()
    leader = cluster.leader()
    follower = (leader + 1) % 3
    cluster.run(6 * SECOND)
    request = ClusterActionRequest(leadership_term_id=0, log_position=96, timestamp=5_999, action=ClusterAction.SNAPSHOT, flags=0)
    event = Event(ts=6 * SECOND, node=follower, dir="in", peer=leader, channel="log", type="ClusterActionRequest",
                  fields=request.to_fields(), extra={"logPosition": 128})
    cluster.nodes[follower].step(input_of(event), event.ts)
    cluster.deliver(6 * SECOND + MS, leader, follower, CommitPosition(leadership_term_id=0, log_position=128, leader_member_id=leader))
    records = [o.describe() for o in cluster.outputs if o.node == follower and o.ts > 6 * SECOND and type(o).__name__ != "Send"]
    assert records == [
        f"{follower} module ACTIVE → SNAPSHOT",
        f"{follower} recording.log appendSnapshot SNAPSHOT term=0 base=0 pos=128",
        f"{follower} recording.log appendSnapshot SNAPSHOT term=0 base=0 pos=128",
        f"{follower} module SNAPSHOT → ACTIVE",
    ]
    entries = cluster.nodes[follower].view().to_json()["recordingLog"]
    assert [(e["recordingId"], e["serviceId"], e["timestamp"]) for e in entries[1:]] == [(1, 0, 5_999), (2, -1, 5_999)]
