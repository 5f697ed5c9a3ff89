"""A follower joining the leader's log takes the time the archive and the services take, as in Aeron.

`ConsensusModuleAgent.tryJoinLogAsFollower` asks the archive to record the leader's log image and
fails until the archive's recording counter is there (`tryCreateAppendPosition`); then
`awaitServicesReady` blocks the module until the services have joined the log; and what the recording
holds, which the member reports in its AppendPositions, moves only once the archive's recorder has
started on the image (its RECORDING_SIGNAL).  The agent log shows all three (`Segment.follower_joins`,
absolute times per log session), and the replay follows them: two real rejoins by catch-up, one where the recorder started
before the join and one where it started after, show the difference on the wire.
"""

from __future__ import annotations

import pytest

from recorder.capture.agent_log_import import parse_agent_log
from recorder.conformance import find_capture_folders
from tests.conftest import REFERENCE, _require

MS = 1_000_000
CAPTURES = REFERENCE / "aeron-1.47.3-capture"

#: Member 0 of j_short_timeouts_leader_kill rejoining by catch-up after its restart (the lines that matter).
REJOIN = """\
[1850.219036635] log started 2026-11-23 19:27:53.163+0000
[1852.374445527] DRIVER: CMD_IN_ADD_SUBSCRIPTION [131/131]: streamId=100 registrationCorrelationId=-1 clientId=17 \
correlationId=76 channel=aeron:udp?tags=74,75|control-mode=manual|session-id=1195139053|alias=log-cm|group=true|rejoin=false
[1853.684808156] DRIVER: CMD_OUT_AVAILABLE_IMAGE [99/99]: sessionId=1195139053 streamId=100 subscriberPositionId=101 \
subscriptionRegistrationId=76 correlationId=79 sourceIdentity=127.0.0.1:51070
[1853.690864219] ARCHIVE: CMD_IN_EXTEND_RECORDING2 [147/147]: controlSessionId=1347292607 correlationId=80 \
recordingId=0 streamId=100 sourceLocation=REMOTE autoStop=TRUE channel=aeron:udp?tags=74,75|control-mode=manual|\
session-id=1195139053|alias=log-cm|group=true|rejoin=false
[1853.693615066] DRIVER: CMD_IN_ADD_SUBSCRIPTION [131/131]: streamId=100 registrationCorrelationId=-1 clientId=1 \
correlationId=81 channel=aeron:udp?tags=74,75|control-mode=manual|session-id=1195139053|alias=log-cm|group=true|rejoin=false
[1853.694265334] DRIVER: CMD_OUT_AVAILABLE_IMAGE [99/99]: sessionId=1195139053 streamId=100 subscriberPositionId=102 \
subscriptionRegistrationId=81 correlationId=79 sourceIdentity=127.0.0.1:51070
[1853.700946023] DRIVER: CMD_IN_ADD_COUNTER [211/211]: typeId=100 keyBufferOffset=24 keyBufferLength=39 \
labelBufferOffset=68 labelBufferLength=139 clientId=1 correlationId=82
[1853.738253014] ARCHIVE: RECORDING_SIGNAL [52/52]: controlSessionId=1347292607 correlationId=80 recordingId=0 \
subscriptionId=81 position=3264 signal=EXTEND
[1853.746298065] CLUSTER: SERVICE_ACK [56/56]: memberId=0 logPosition=3264 timestamp=1795462061047 \
timeUnit=MILLISECONDS ackId=2 relevantId=-1 serviceId=0
[1853.746428529] CLUSTER: ELECTION_STATE_CHANGE [106/106]: memberId=0 FOLLOWER_CATCHUP_AWAIT -> FOLLOWER_CATCHUP \
leaderId=1 candidateTermId=2 leadershipTermId=2 logPosition=3264 logLeadershipTermId=1 appendPosition=3264 \
catchupPosition=6528 reason=
"""


def test_a_follower_join_is_timed_by_the_recording_counter_the_services_ack_and_the_recorder_start():
    segment = parse_agent_log(REJOIN, source="node0").segments[0]
    # (session, RecordingPos counter (typeId=100) after the archive's image, SERVICE_ACK, RECORDING_SIGNAL EXTEND)
    assert segment.follower_joins == [(1195139053, 1853_700_946_023, 1853_746_298_065, 1853_738_253_014)]


def test_without_driver_lines_a_follower_join_is_timed_to_the_services_ack():
    # As the real 1.41.7 capture logs: no DRIVER context, so the recording counter is never seen.
    without_driver = "".join(line + "\n" for line in REJOIN.splitlines() if "DRIVER:" not in line)
    segment = parse_agent_log(without_driver, source="node0").segments[0]
    assert segment.follower_joins == [(1195139053, 1853_746_298_065, 1853_746_298_065, 1853_738_253_014)]


def test_a_leader_recording_its_own_log_is_no_follower_join():
    leader = REJOIN.replace("sourceLocation=REMOTE", "sourceLocation=LOCAL").replace("alias=log-cm", "alias=log")
    segment = parse_agent_log(leader, source="node0").segments[0]
    assert segment.follower_joins == []


def _replayed(name: str) -> tuple[list, list]:
    from engine.replay import replay
    from recorder.convert import build

    _require(CAPTURES)
    folder = next((f for f in find_capture_folders(CAPTURES) if f.name == name), None)
    if folder is None:
        pytest.skip(f"capture {name} not in {CAPTURES}")
    built = build(folder.inputs(agent_logs=True))
    return built.events, list(replay(built.events))


def _first_catchup_append_position(items: list, node: int, after_ns: int) -> tuple[int, int]:
    """(ts, logPosition) of the member's first AppendPosition with the catch-up flag after ``after_ns``."""
    for item in items:
        event = item if not isinstance(item, dict) else None
        if event is not None:
            ts, fields, ok = event.ts, event.fields, event.dir == "out" and event.type == "AppendPosition"
            who = event.node
        else:
            ts, fields, ok = item.get("ts", 0), item.get("fields") or {}, (
                item.get("kind") == "send" and item.get("type") == "AppendPosition")
            who = item.get("node")
        if ok and who == node and ts > after_ns and fields.get("flags") == 1:
            return ts, fields["logPosition"]
    raise AssertionError(f"member {node} sent no catch-up AppendPosition after {after_ns}")


def test_a_rejoining_member_whose_recorder_started_before_its_join_reports_the_whole_catch_up_first():
    # j_short_timeouts_leader_kill: member 0 restarts, the leader's catch-up replay (3264 -> 6528) is in its
    # image 60 ms before the services have joined; the archive recorded it all by then: 6528 first.
    events, records = _replayed("j_short_timeouts_leader_kill")
    restart = next(e.ts for e in events if e.node == 0 and e.type == "MemberStart" and e.ts > events[0].ts + 10**10)
    captured_ts, captured = _first_catchup_append_position(events, 0, restart)
    modelled_ts, modelled = _first_catchup_append_position(records, 0, restart)
    assert (captured, modelled) == (6528, 6528)
    assert abs(modelled_ts - captured_ts) < 20 * MS
    assert [r for r in records if r.get("kind") == "divergence" and r.get("node") == 0] == []


def test_a_rejoining_member_whose_recorder_started_after_its_join_reports_the_join_position_first():
    # f_follower_kill_rejoin_catchup: the whole catch-up (8320 -> 45984) is in member 0's image 64 ms before
    # it joins, but the archive's recorder starts 2 ms after the join: 8320 first, 45984 in the next cycle.
    events, records = _replayed("f_follower_kill_rejoin_catchup")
    restart = max(e.ts for e in events if e.node == 0 and e.type == "MemberStart")
    assert _first_catchup_append_position(events, 0, restart)[1] == 8320
    assert _first_catchup_append_position(records, 0, restart)[1] == 8320
    assert not [r for r in records if r.get("kind") == "divergence" and r.get("node") == 0]


def test_a_catching_up_member_reports_the_term_its_log_has_reached_not_the_elections():
    # g_leader_sigterm_reelection_rejoin: member 0 restarts into member 2's term 3 and catches up from 49344;
    # Aeron's catchupPoll sends the module's leadershipTermId (term 2, its log's last NewLeadershipTermEvent)
    # in its AppendPositions, as the capture shows, until the log reaches term 3's event.
    events, records = _replayed("g_leader_sigterm_reelection_rejoin")
    restart = max(e.ts for e in events if e.node == 0 and e.type == "MemberStart")
    captured = next(e for e in events if e.node == 0 and e.dir == "out" and e.type == "AppendPosition"
                    and e.ts > restart and e.fields.get("flags") == 1)
    modelled = next(r for r in records if r.get("kind") == "send" and r.get("node") == 0
                    and r.get("type") == "AppendPosition" and r["ts"] > restart and r["fields"].get("flags") == 1)
    assert captured.fields["leadershipTermId"] == modelled["fields"]["leadershipTermId"] == 2
    assert captured.fields["logPosition"] == modelled["fields"]["logPosition"] == 52608


def test_without_agent_logs_a_rejoin_is_timed_by_the_wire_and_what_it_cannot_time_is_missing_evidence():
    # j_short_timeouts_leader_kill from the pcap and the members' dirs only: member 0's first AppendPosition
    # to its leader after the catch-up image shows its join over (`recorder.capture.follower_joins`): no
    # divergence is left.  In i_restart_all_one_member_behind what the wire still cannot time (member 1's
    # log replay after its replication) is put down to missing evidence, naming the agent log.
    from engine.replay import replay
    from recorder.convert import build

    _require(CAPTURES)
    folders = {f.name: f for f in find_capture_folders(CAPTURES)}
    if "j_short_timeouts_leader_kill" not in folders or "i_restart_all_one_member_behind" not in folders:
        pytest.skip(f"captures j_short_timeouts_leader_kill, i_restart_all_one_member_behind not in {CAPTURES}")
    records = list(replay(build(folders["j_short_timeouts_leader_kill"].inputs(agent_logs=False)).events))
    assert not [r for r in records if r.get("kind") == "divergence" and r.get("node") == 0]
    records = list(replay(build(folders["i_restart_all_one_member_behind"].inputs(agent_logs=False)).events))
    member1 = [r for r in records if r.get("kind") == "divergence" and r.get("node") == 1]
    assert member1 and {r["cause"] for r in member1} <= {"evidence", "timing"}
    evidence = [r for r in member1 if r["cause"] == "evidence"]
    assert evidence and all("agent log" in r["settledBy"] and "SERVICE_ACK" in r["settledBy"] for r in evidence)
    with_logs = list(replay(build(folders["i_restart_all_one_member_behind"].inputs(agent_logs=True)).events))
    assert not [r for r in with_logs if r.get("kind") == "divergence" and r.get("cause") == "evidence"]
