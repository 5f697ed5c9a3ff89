"""Aeron behaviours that real incidents showed, each held against the capture that showed it.

Each test names the behaviour, reads the real Aeron 1.47.3 capture that showed it (skipping with a
clear reason where ``../shared`` is absent), converts and replays it as a user would, and checks the
model against what the real member's agent log says it did.  The unit tests beside them pin the same
behaviour without the reference material.
"""

from __future__ import annotations

import pytest

from engine.replay import replay
from recorder.capture.agent_log_import import agent_log_events, parse_agent_log
from recorder.conformance import find_capture_folders
from recorder.convert import build
from tests.conftest import REFERENCE, _require

CAPTURES = REFERENCE / "aeron-1.47.3-capture"
MS = 1_000_000


def _folder(name: str):
    root = _require(CAPTURES / name)
    return next(f for f in find_capture_folders(root.parent) if f.name == name)


def _replayed(name: str, *, agent_logs: bool = True):
    built = build(_folder(name).inputs(agent_logs=agent_logs))
    return built.events, list(replay(built.events))


def _logged_states(events, member: int) -> list[tuple[int, str, str]]:
    return [(e.ts, e.fields["from"], e.fields["to"]) for e in events
            if e.type == "ElectionStateChange" and e.node == member]


def _model_states(records, member: int) -> list[tuple[int, str, str]]:
    return [(r["ts"], r["from"], r["to"]) for r in records if r["kind"] == "state" and r["node"] == member]


# --- a log replication follows the archive's recording signals ------------------------------------------

#: The archive lines of a consensus module (control session 7) and of its service (session 9).
ARCHIVE_LINES = """\
[1.000000000] log started 2026-01-01 00:00:00.000+0000
[1.100000000] CLUSTER: ELECTION_STATE_CHANGE [79/79]: memberId=1 INIT -> CANVASS leaderId=-1 candidateTermId=-1 \
leadershipTermId=-1 logPosition=0 logLeadershipTermId=-1 appendPosition=0 catchupPosition=-1 reason=
[1.200000000] ARCHIVE: CMD_IN_STOP_RECORDING_BY_IDENTITY [32/32]: controlSessionId=7 correlationId=48 recordingId=0
[1.300000000] ARCHIVE: CMD_IN_REPLICATE2 [164/164]: controlSessionId=7 correlationId=87 srcRecordingId=0 \
dstRecordingId=0 stopPosition=60480 channelTagId=-1 subscriptionTagId=-1 srcControlStreamId=10
[1.400000000] ARCHIVE: RECORDING_SIGNAL [52/52]: controlSessionId=7 correlationId=99 recordingId=0 \
subscriptionId=94 position=56352 signal=EXTEND
[1.500000000] ARCHIVE: RECORDING_SIGNAL [52/52]: controlSessionId=7 correlationId=99 recordingId=0 \
subscriptionId=-1 position=-1 signal=REPLICATE_END
[1.600000000] ARCHIVE: RECORDING_SIGNAL [52/52]: controlSessionId=7 correlationId=99 recordingId=0 \
subscriptionId=94 position=60480 signal=STOP
[1.700000000] ARCHIVE: CMD_IN_START_RECORDING2 [86/86]: controlSessionId=9 correlationId=141 streamId=106 \
sourceLocation=LOCAL autoStop=TRUE channel=aeron:ipc?session-id=12|alias=snapshot
[1.800000000] ARCHIVE: RECORDING_SIGNAL [52/52]: controlSessionId=9 correlationId=141 recordingId=5 \
subscriptionId=142 position=0 signal=START
[1.900000000] ARCHIVE: CMD_IN_EXTEND_RECORDING2 [149/149]: controlSessionId=7 correlationId=114 recordingId=0 \
streamId=100 sourceLocation=REMOTE autoStop=TRUE channel=aeron:udp?control-mode=manual|session-id=3|alias=log-cm
[2.000000000] ARCHIVE: CMD_IN_STOP_RECORDING_SUBSCRIPTION [32/32]: controlSessionId=7 correlationId=159 subscriptionId=115
[2.100000000] ARCHIVE: RECORDING_SIGNAL [52/52]: controlSessionId=7 correlationId=114 recordingId=0 \
subscriptionId=115 position=62880 signal=STOP
"""


def test_the_archive_signals_to_the_consensus_module_become_recording_signal_inputs():
    events = [e for e in agent_log_events(parse_agent_log(ARCHIVE_LINES, source="n1.log"))
              if e.type == "RecordingSignal"]
    # The module's own session (it asked for a replication): its signals, in order.  The service's
    # snapshot recording (session 9) is not the module's, and the STOP answering the module's own
    # request to stop subscription 115 is the echo of what the model does itself.
    assert [(e.node, e.fields["signal"], e.fields["recordingId"], e.fields["position"]) for e in events] == [
        (1, "EXTEND", 0, 56352), (1, "REPLICATE_END", 0, -1), (1, "STOP", 0, 60480)]
    assert events[0].fields["correlationId"] == 99 and events[0].dir == "local"


def test_a_follower_log_replication_lasts_until_the_archive_signals_its_end():
    """i_restart_all_one_member_behind: member 1 (behind) replicated the log from leader 0's archive
    from 19:26:55.382 to 19:26:56.556, when its archive signalled REPLICATE_END and STOP; then it
    needed a catch-up, the leader's log having moved on.  A replication that ends when it starts
    skipped the catch-up."""
    events, records = _replayed("i_restart_all_one_member_behind")
    logged = _logged_states(events, 1)
    modelled = _model_states(records, 1)
    assert [s[1:] for s in modelled] == [s[1:] for s in logged]
    end = next(ts for ts, was, _ in logged if was == "FOLLOWER_LOG_REPLICATION")
    modelled_end = next(ts for ts, was, _ in modelled if was == "FOLLOWER_LOG_REPLICATION")
    assert abs(modelled_end - end) < 20 * MS


@pytest.mark.parametrize("name", ["a_clean_start", "i_restart_all_one_member_behind"])
def test_a_leader_stopping_its_own_log_recording_at_shutdown_starts_no_election(name):
    """a_clean_start: leader 1, TERMINATING after its shutdown snapshot, stops its log recording and
    the archive answers STOP; Aeron's module is no longer ACTIVE and ignores it."""
    _events, records = _replayed(name)
    assert not [r for r in records if r["kind"] == "election" and "log recording stopped" in str(r)]


def test_a_follower_publishes_no_replication_position_before_the_archive_gives_one():
    """Aeron's RecordingReplication starts at NULL_POSITION: in i_restart_all_one_member_behind member 1
    sent its first AppendPosition of the replication (56352, its own log's end) only when the archive's
    EXTEND signal gave the position, 1.17 s after entering FOLLOWER_LOG_REPLICATION."""
    events, records = _replayed("i_restart_all_one_member_behind")
    entered = next(ts for ts, _, to in _model_states(records, 1) if to == "FOLLOWER_LOG_REPLICATION")
    extend = next(e.ts for e in events if e.type == "RecordingSignal" and e.node == 1 and e.ts > entered)
    first = next(r for r in records if r["kind"] == "send" and r["node"] == 1 and r["type"] == "AppendPosition"
                 and r["ts"] >= entered)
    recorded = next(e for e in events if e.node == 1 and e.dir == "out" and e.type == "AppendPosition"
                    and e.ts >= entered)
    assert first["ts"] >= extend
    assert first["fields"]["logPosition"] == recorded.fields["logPosition"] == 56352
    assert abs(first["ts"] - recorded.ts) < 20 * MS


# --- a follower joins the log once its archive records it and its services have it ----------------------

#: A follower's DRIVER and ARCHIVE lines and SERVICE_ACKs around two joins: session 5 (the module's image,
#: the request to record it, the archive's subscription and image, the recording's position counter, the
#: recorder's START signal, the services' ack) and session 6, whose image the archive never got.
JOIN_LINES = """\
[1.000000000] log started 2026-01-01 00:00:00.000+0000
[1.100000000] CLUSTER: ELECTION_STATE_CHANGE [79/79]: memberId=3 INIT -> CANVASS leaderId=-1 candidateTermId=-1 \
leadershipTermId=-1 logPosition=0 logLeadershipTermId=-1 appendPosition=0 catchupPosition=-1 reason=
[1.200000000] DRIVER: CMD_IN_ADD_SUBSCRIPTION [129/129]: streamId=100 registrationCorrelationId=-1 clientId=17 \
correlationId=72 channel=aeron:udp?control-mode=manual|session-id=5|alias=log-cm|group=true
[1.300000000] DRIVER: CMD_OUT_AVAILABLE_IMAGE [99/99]: sessionId=5 streamId=100 subscriberPositionId=137 \
subscriptionRegistrationId=72 correlationId=74 sourceIdentity=127.0.0.1:48081
[1.340000000] ARCHIVE: CMD_IN_START_RECORDING2 [139/139]: controlSessionId=9 correlationId=75 streamId=100 \
sourceLocation=REMOTE autoStop=TRUE channel=aeron:udp?control-mode=manual|session-id=5|alias=log-cm|group=true
[1.350000000] DRIVER: CMD_IN_ADD_SUBSCRIPTION [129/129]: streamId=100 registrationCorrelationId=-1 clientId=1 \
correlationId=76 channel=aeron:udp?control-mode=manual|session-id=5|alias=log-cm|group=true
[1.360000000] DRIVER: CMD_OUT_AVAILABLE_IMAGE [99/99]: sessionId=5 streamId=100 subscriberPositionId=140 \
subscriptionRegistrationId=76 correlationId=74 sourceIdentity=127.0.0.1:48081
[1.380000000] DRIVER: CMD_IN_ADD_COUNTER [207/207]: typeId=100 keyBufferOffset=24 keyBufferLength=39 clientId=1
[1.400000000] ARCHIVE: RECORDING_SIGNAL [52/52]: controlSessionId=9 correlationId=75 recordingId=0 \
subscriptionId=76 position=0 signal=START
[1.500000000] CLUSTER: SERVICE_ACK [56/56]: memberId=3 logPosition=0 timestamp=0 timeUnit=MILLISECONDS ackId=1 \
relevantId=-1 serviceId=0
[2.200000000] DRIVER: CMD_IN_ADD_SUBSCRIPTION [129/129]: streamId=100 registrationCorrelationId=-1 clientId=17 \
correlationId=105 channel=aeron:udp?control-mode=manual|session-id=6|alias=log-cm|group=true
[2.300000000] DRIVER: CMD_OUT_AVAILABLE_IMAGE [99/99]: sessionId=6 streamId=100 subscriberPositionId=102 \
subscriptionRegistrationId=105 correlationId=107 sourceIdentity=127.0.0.1:55229
[2.340000000] ARCHIVE: CMD_IN_EXTEND_RECORDING2 [148/148]: controlSessionId=9 correlationId=108 recordingId=0 \
streamId=100 sourceLocation=REMOTE autoStop=TRUE channel=aeron:udp?control-mode=manual|session-id=6|alias=log-cm|group=true
[2.350000000] DRIVER: CMD_IN_ADD_SUBSCRIPTION [129/129]: streamId=100 registrationCorrelationId=-1 clientId=1 \
correlationId=109 channel=aeron:udp?control-mode=manual|session-id=6|alias=log-cm|group=true
"""


def test_the_agent_log_tells_when_each_follower_join_was_recorded_acknowledged_and_its_recorder_started():
    parsed = parse_agent_log(JOIN_LINES, source="n3.log")
    (segment,) = parsed.segments
    assert segment.follower_joins == [(5, 1_380_000_000, 1_500_000_000, 1_400_000_000), (6, None, None, None)]


def test_a_follower_waits_for_its_archive_and_services_to_join_the_log():
    """h_five_members_leader_kill, term 0: member 3 had leader 2's log image at 19:23:33.425 but was
    FOLLOWER_READY only at 19:23:33.633, once its archive recorded the log (+87 ms) and its service
    acknowledged (+120 ms): `tryJoinLogAsFollower` waits for the recording, `awaitServicesReady` blocks."""
    events, records = _replayed("h_five_members_leader_kill")
    logged = next(ts for ts, was, to in _logged_states(events, 3) if to == "FOLLOWER_READY")
    modelled = next(ts for ts, was, to in _model_states(records, 3) if to == "FOLLOWER_READY")
    assert abs(modelled - logged) < 5 * MS


def test_a_follower_whose_services_never_get_the_ended_log_image_waits_for_ever():
    """h_five_members_leader_kill, term 1: leader 1 stepped down as members 3 and 4 joined its log, whose
    image reached end of stream within ms.  Member 3's archive recorded it but its service subscribed
    after it drained: the module waited in `awaitServicesReady`, silent, until it was killed at
    19:25:29.  Member 4's archive subscribed too late: no recording, and FOLLOWER_LOG_AWAIT timed out
    after 10 s (19:24:07.510) to follow member 0."""
    events, records = _replayed("h_five_members_leader_kill")
    killed = next(e.ts for e in events if e.type == "MemberCrash" and e.node == 3)
    for member in (3, 4):
        logged = [s for s in _logged_states(events, member) if s[0] < killed]
        modelled = [s for s in _model_states(records, member) if s[0] < killed]
        assert [s[1:] for s in modelled] == [s[1:] for s in logged], member
        assert all(abs(m[0] - r[0]) < 200 * MS for m, r in zip(modelled, logged, strict=True)), member
    last = max(ts for ts, _, _ in _model_states(records, 3) if ts < killed)
    assert not [r for r in records if r["kind"] == "send" and r["node"] == 3 and last < r["ts"] < killed]


def test_catch_up_frames_that_reach_the_image_before_the_join_are_read_after_it():
    """j_short_timeouts_leader_kill: the restarted member 0's catch-up arrived at 19:27:56.632, before its
    join completed (19:27:56.691); the image held the frames and the member caught up at once.  Dropped,
    the catch-up stalled and timed out."""
    events, records = _replayed("j_short_timeouts_leader_kill")
    assert [s[1:] for s in _model_states(records, 0)] == [s[1:] for s in _logged_states(events, 0)]


# --- a member's nomination falls due when its agent log says it did -------------------------------------


def test_a_recorded_nomination_is_when_the_agent_log_shows_the_ballot_not_when_the_request_reached_the_wire():
    """h_five_members_leader_kill: member 0 went NOMINATE -> CANDIDATE_BALLOT (candidate term 2) at
    19:23:56.479; its RequestVotes reached the wire at 19:23:56.501 on the loaded host.  Nominating on
    the wire's time put the model's whole leadership 9 ms late: its LEADER_READY ended after the
    capture's NewLeadershipTermEvent, and it appended a second one."""
    events, records = _replayed("h_five_members_leader_kill")
    logged = next(ts for ts, was, to in _logged_states(events, 0) if to == "CANDIDATE_BALLOT" and ts > 1795461836e9)
    modelled = next(ts for ts, was, to in _model_states(records, 0) if to == "CANDIDATE_BALLOT" and ts > 1795461836e9)
    assert abs(modelled - logged) < MS
    appended = [r["fields"]["logPosition"] for r in records if r["kind"] == "logAppend" and r["node"] == 0
                and r["type"] == "NewLeadershipTermEvent" and r["fields"]["leadershipTermId"] == 2]
    assert appended == [4320]


# --- the operator's ClusterTool abort reaches the leader -------------------------------------------------

ABORT_LINES = """\
[1.000000000] log started 2026-01-01 00:00:00.000+0000
[1.100000000] CLUSTER: ROLE_CHANGE [29/29]: memberId=0 FOLLOWER -> CANDIDATE
[1.200000000] CLUSTER: ROLE_CHANGE [27/27]: memberId=0 CANDIDATE -> LEADER
[1.300000000] CLUSTER: STATE_CHANGE [22/22]: memberId=0 INIT -> ACTIVE
[4.000000000] CLUSTER: STATE_CHANGE [29/29]: memberId=0 ACTIVE -> TERMINATING
[5.000000000] log started 2026-01-01 00:00:10.000+0000
[5.100000000] CLUSTER: ROLE_CHANGE [29/29]: memberId=0 LEADER -> FOLLOWER
[5.200000000] CLUSTER: STATE_CHANGE [29/29]: memberId=0 ACTIVE -> TERMINATING
"""


def test_a_leader_going_from_active_to_terminating_took_the_operators_abort():
    parsed = parse_agent_log(ABORT_LINES, source="n0.log")
    # A follower reaching its termination position goes ACTIVE -> TERMINATING too: not an abort.
    assert [segment.aborts for segment in parsed.segments] == [[4_000_000_000], []]


def test_a_leader_told_to_abort_sends_every_member_the_termination_position_at_its_logs_end():
    """i_restart_all_one_member_behind: `ClusterTool abort` on leader 0 at 19:26:37.5; its next slow tick
    sent members 1 and 2 TerminationPosition(term 4, 60480) and went TERMINATING, without a snapshot."""
    events, records = _replayed("i_restart_all_one_member_behind")
    recorded = [(e.peer, e.fields["leadershipTermId"], e.fields["logPosition"], e.ts) for e in events
                if e.node == 0 and e.dir == "out" and e.type == "TerminationPosition" and e.ts < 1795461998e9]
    modelled = [(r["peer"], r["fields"]["leadershipTermId"], r["fields"]["logPosition"], r["ts"]) for r in records
                if r["kind"] == "send" and r["node"] == 0 and r["type"] == "TerminationPosition" and r["ts"] < 1795461998e9]
    assert [m[:3] for m in modelled] == [r[:3] for r in recorded] == [(1, 4, 60480), (2, 4, 60480)]
    assert all(abs(m[3] - r[3]) < 20 * MS for m, r in zip(modelled, recorded, strict=True))


def test_what_reached_a_process_that_died_waiting_is_not_handed_to_the_next_one():
    """h_five_members_leader_kill: member 3 was killed (19:25:29) while its module waited for its
    services; the NewLeadershipTerms and CommitPositions of term 2 that reached it meanwhile died with
    it.  Handed to its next process when that one's join waited, they made its catch-up read past the
    commit position the leader gave it, and it never finished; the real one did (19:25:41.925)."""
    events, records = _replayed("h_five_members_leader_kill")
    restarted = [e.ts for e in events if e.type == "MemberStart" and e.node == 3][-1]
    logged = [s[1:] for s in _logged_states(events, 3) if s[0] >= restarted]
    modelled = [s[1:] for s in _model_states(records, 3) if s[0] >= restarted]
    assert modelled[:len(logged)] == logged


# --- a follower learns of its leader's graceful close from its archive's recording stopping -------------


def test_a_followers_archive_stopping_at_the_logs_end_of_stream_starts_its_election_not_the_end_of_stream():
    """h_five_members_leader_kill, SIGTERM to all: leader 0's log ended (end of stream) at 19:25:48.666.
    Aeron's follower image stays open until its driver drops it; member 4, the last one running, went
    into an election when its archive's recording stopped there (autoStop): "log recording stopped:
    eos=true" (19:25:48.69).  Members 1 and 2, closing, had stopped their recordings themselves and
    made no election."""
    events, records = _replayed("h_five_members_leader_kill")
    shutdown = 1795461948e9
    late = [(r["node"], r["reason"]) for r in records if r["kind"] == "election" and r["ts"] > shutdown]
    assert (4, "log recording stopped: eos=true") in late
    assert not [node for node, _ in late if node in (1, 2)]


#: A follower's module (control session 7) records the log; its archive then stops the recording on its own.
CLOSING_LINES = """\
[1.000000000] log started 2026-01-01 00:00:00.000+0000
[1.100000000] CLUSTER: ELECTION_STATE_CHANGE [79/79]: memberId=3 INIT -> CANVASS leaderId=-1 candidateTermId=-1 \
leadershipTermId=-1 logPosition=0 logLeadershipTermId=-1 appendPosition=0 catchupPosition=-1 reason=
[1.200000000] ARCHIVE: CMD_IN_EXTEND_RECORDING2 [149/149]: controlSessionId=7 correlationId=84 recordingId=0 \
streamId=100 sourceLocation=REMOTE autoStop=TRUE channel=aeron:udp?control-mode=manual|session-id=3|alias=log-cm
[1.300000000] ARCHIVE: RECORDING_SIGNAL [52/52]: controlSessionId=7 correlationId=84 recordingId=0 \
subscriptionId=85 position=10720 signal=STOP
"""


@pytest.mark.parametrize("then, kept", [
    ("[1.400000000] CLUSTER: STATE_CHANGE [24/24]: memberId=3 ACTIVE -> CLOSED\n", False),
    ("[1.350000000] CLUSTER: NEW_ELECTION [63/63]: memberId=3 leadershipTermId=2 logPosition=10720 "
     "appendPosition=10720 reason=log recording stopped: eos=true\n"
     "[1.400000000] CLUSTER: STATE_CHANGE [24/24]: memberId=3 ACTIVE -> CLOSED\n", True),
])
def test_a_log_recording_stop_the_closing_module_never_polled_is_not_an_input(then, kept):
    events = agent_log_events(parse_agent_log(CLOSING_LINES + then, source="n3.log"))
    assert bool([e for e in events if e.type == "RecordingSignal" and e.fields["signal"] == "STOP"]) is kept


def test_a_follower_closing_when_its_archive_stops_the_log_recording_starts_no_election():
    """h_five_members_leader_kill, SIGTERM to all: member 3's archive signalled STOP at 19:25:48.68 (leader
    0's log ended) while its module was closing (CLOSED next, no NEW_ELECTION): Aeron's module enters an
    election only in a duty cycle that polls the signal.  Member 4's module polled its own and did."""
    events, records = _replayed("h_five_members_leader_kill")
    assert _model_states(records, 3)[-1][1:] == _logged_states(events, 3)[-1][1:] == ("FOLLOWER_READY", "CLOSED")
    assert _model_states(records, 4)[-1][1:] == _logged_states(events, 4)[-1][1:] == ("INIT", "CANVASS")
