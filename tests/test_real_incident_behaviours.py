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


@pytest.mark.parametrize("agent_logs", [True, False])
def test_a_leader_told_to_abort_sends_every_member_the_termination_position_at_its_logs_end(agent_logs):
    """i_restart_all_one_member_behind: `ClusterTool abort` on leader 0 at 19:26:37.5; its next slow tick
    sent members 1 and 2 TerminationPosition(term 4, 60480) and went TERMINATING, without a snapshot.
    Without the agent log's ACTIVE -> TERMINATING, the TerminationPositions at a position no SNAPSHOT
    action ends at say the same (`recorder.capture.shutdowns.aborts`)."""
    events, records = _replayed("i_restart_all_one_member_behind", agent_logs=agent_logs)
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


# --- a leader's ClusterTool shutdown, seen on the wire without agent logs --------------------------------


def _shutdown_snapshots(events) -> dict[tuple[int, int], int]:
    return {(e.node, e.fields["shutdownSnapshot"]): e.ts for e in events
            if e.type == "MemberStart" and e.fields.get("shutdownSnapshot") is not None}


@pytest.mark.parametrize("name", ["g_leader_sigterm_reelection_rejoin", "i_restart_all_one_member_behind"])
def test_the_wire_names_the_same_shutdown_snapshot_as_the_agent_log(name):
    """The SNAPSHOT -> TERMINATING line of the leader's agent log and, without it, the leader's own
    TerminationPosition at the end of a SNAPSHOT action it appended: the same life, the same snapshot."""
    with_logs = build(_folder(name).inputs(agent_logs=True)).events
    without = build(_folder(name).inputs(agent_logs=False)).events
    logged = sorted(_shutdown_snapshots(with_logs))
    assert logged and sorted(_shutdown_snapshots(without)) == logged


def test_a_leader_shut_down_by_clustertool_sends_termination_positions_without_agent_logs():
    """g_leader_sigterm_reelection_rejoin, pcap + dirs only: ClusterTool shutdown on leader 2 at
    19:23:37.237: it appended a SNAPSHOT action ending at 54048 and sent both followers
    TerminationPosition(term 3, 54048)."""
    events, records = _replayed("g_leader_sigterm_reelection_rejoin", agent_logs=False)
    recorded = [(e.peer, e.fields["leadershipTermId"], e.fields["logPosition"], e.ts) for e in events
                if e.node == 2 and e.dir == "out" and e.type == "TerminationPosition"]
    modelled = [(r["peer"], r["fields"]["leadershipTermId"], r["fields"]["logPosition"], r["ts"]) for r in records
                if r["kind"] == "send" and r["node"] == 2 and r["type"] == "TerminationPosition"]
    assert sorted(m[:3] for m in modelled) == sorted(r[:3] for r in recorded) == [(0, 3, 54048), (1, 3, 54048)]
    assert all(abs(m[3] - r[3]) < 20 * MS for m, r in zip(sorted(modelled), sorted(recorded), strict=True))


# --- a new leader's log publication and its join, seen on the wire without agent logs --------------------


def _logged_change(events, member: int, to: str, after: int = 0) -> int:
    return next(e.ts for e in events if e.type == "ElectionStateChange" and e.node == member
                and e.fields["to"] == to and e.ts >= after)


def test_a_leaders_log_publication_was_there_when_its_first_new_leadership_term_named_its_session():
    """j_short_timeouts_leader_kill, pcap + dirs only: leader 1's addLogPublication returned at 19:27:45.8741
    (its agent log's LEADER_LOG_REPLICATION), its first NewLeadershipTerm naming the new log session left at
    .8746, the log's first SETUP only at .9640.  The model's leader waited for the SETUP: 90 ms late."""
    logged_events = build(_folder("j_short_timeouts_leader_kill").inputs(agent_logs=True)).events
    events, records = _replayed("j_short_timeouts_leader_kill", agent_logs=False)
    logged = _logged_change(logged_events, 1, "LEADER_LOG_REPLICATION", after=int(1795462060e9))
    modelled = next(ts for ts, _, to in _model_states(records, 1) if to == "LEADER_LOG_REPLICATION" and ts > 1795462060e9)
    assert abs(modelled - logged) < 2 * MS


@pytest.mark.parametrize("name", ["a_clean_start", "f_follower_kill_rejoin_catchup", "g_leader_sigterm_reelection_rejoin",
                                  "i_restart_all_one_member_behind", "j_short_timeouts_leader_kill"])
def test_a_leaders_first_commit_position_of_its_term_follows_its_join_of_the_log(name):
    """The wire's sight of each leader join over (`recorder.capture.leader_joins`) against the agent log's
    LEADER_INIT -> LEADER_READY: never before it, within 10 ms after it, one per join.  (In
    h_five_members_leader_kill leader 2's first one came 50 ms after, its publications not all connected
    yet: not held to 10 ms here.)"""
    logged_events = build(_folder(name).inputs(agent_logs=True)).events
    ready = sorted((e.node, e.ts) for e in logged_events
                   if e.type == "ElectionStateChange" and e.fields["to"] == "LEADER_READY")
    seen = sorted((e.node, at) for e in build(_folder(name).inputs(agent_logs=False)).events
                  if e.type == "MemberStart" for at in e.fields.get("leaderJoinsReadyNs", ()))
    assert [node for node, _ in seen] == [node for node, _ in ready]
    assert all(0 <= at - logged < 10 * MS for (_, at), (_, logged) in zip(seen, ready, strict=True))


def test_a_new_leader_is_ready_when_the_wire_shows_its_join_over_without_agent_logs():
    """j_short_timeouts_leader_kill, pcap + dirs only: leader 1's services took 59 ms to join its log
    (LEADER_INIT 19:27:45.8746 -> LEADER_READY .9338); its first CommitPosition of term 2 left at .9365.
    Without that wait the model's leader was ready at once and sent term 2's NewLeadershipTerm and
    CommitPosition 60 ms early."""
    logged_events = build(_folder("j_short_timeouts_leader_kill").inputs(agent_logs=True)).events
    events, records = _replayed("j_short_timeouts_leader_kill", agent_logs=False)
    logged = _logged_change(logged_events, 1, "LEADER_READY", after=int(1795462060e9))
    modelled = next(ts for ts, _, to in _model_states(records, 1) if to == "LEADER_READY" and ts > 1795462060e9)
    assert 0 <= modelled - logged < 5 * MS
    recorded = next(e.ts for e in events if e.node == 1 and e.dir == "out" and e.type == "CommitPosition"
                    and e.fields["leadershipTermId"] == 2)
    sent = next(r["ts"] for r in records if r["kind"] == "send" and r["node"] == 1 and r["type"] == "CommitPosition"
                and r["fields"]["leadershipTermId"] == 2)
    assert abs(sent - recorded) < MS


# --- a follower that never joined its leader's log, seen on the wire without agent logs ------------------


def _never_joined(events) -> set[tuple[int, int]]:
    return {(e.node, join[0]) for e in events if e.type == "MemberStart"
            for join in e.fields.get("followerJoinsNs", ()) if None in join[1:3]}


@pytest.mark.parametrize("name", ["f_follower_kill_rejoin_catchup", "g_leader_sigterm_reelection_rejoin",
                                  "h_five_members_leader_kill", "i_restart_all_one_member_behind",
                                  "j_short_timeouts_leader_kill"])
def test_the_wire_names_the_same_follower_joins_that_never_happened_as_the_agent_logs(name):
    """A follower with the image of its leader's log that sent that leader no AppendPosition afterwards in
    that life never joined; the agent logs' joins with no recording counter or no services' ack are the
    same (member, log session) pairs (h_five_members_leader_kill: members 3 and 4, member 1's term-1 log)."""
    with_logs = _never_joined(build(_folder(name).inputs(agent_logs=True)).events)
    assert _never_joined(build(_folder(name).inputs(agent_logs=False)).events) == with_logs
    assert bool(with_logs) == (name == "h_five_members_leader_kill")


def test_a_follower_whose_archive_never_recorded_the_log_times_out_waiting_without_agent_logs():
    """h_five_members_leader_kill, pcap + dirs only: member 4 had the image of leader 1's term-1 log at
    19:23:59.36 but never joined it; its FOLLOWER_LOG_AWAIT timed out 10 s after it began (-> INIT at
    19:24:07.510), where the model had joined at the image and gone on to CLOSED."""
    logged_events = build(_folder("h_five_members_leader_kill").inputs(agent_logs=True)).events
    events, records = _replayed("h_five_members_leader_kill", agent_logs=False)
    logged = [s for s in _logged_states(logged_events, 4) if s[1] == "FOLLOWER_LOG_AWAIT"]
    modelled = [s for s in _model_states(records, 4) if s[1] == "FOLLOWER_LOG_AWAIT"]
    assert [s[1:] for s in modelled] == [s[1:] for s in logged]
    timed_out = [(m[0], r[0]) for m, r in zip(modelled, logged, strict=True) if m[2] == "INIT"]
    assert len(timed_out) == 1 and abs(timed_out[0][0] - timed_out[0][1]) < 50 * MS


def test_a_follower_silent_past_the_timeout_after_the_image_was_blocked_waiting_for_its_services():
    """h_five_members_leader_kill, pcap + dirs only: member 3 had the image of leader 1's term-1 log at
    19:23:59.33 and sent nothing at all until it was killed at 19:25:29: a module waiting in
    FOLLOWER_LOG_AWAIT would have timed out into an election after 10 s and canvassed; it was blocked in
    `awaitServicesReady` (its agent log: the services never acknowledged).  The model waits with it."""
    events, records = _replayed("h_five_members_leader_kill", agent_logs=False)
    start = next(e for e in events if e.type == "MemberStart" and e.node == 3)
    # Member 1's term-1 log (session -995321828): the recording counter there at the image, the services never.
    assert [join[1:] for join in start.fields["followerJoinsNs"] if join[0] == -995321828] == [
        [1795461839326449000, None, None]]
    crashed = next(e.ts for e in events if e.type == "MemberCrash" and e.node == 3)
    waited = [s for s in _model_states(records, 3) if 1795461837e9 < s[0] < crashed]
    assert waited[-1][1:] == ("FOLLOWER_LOG_INIT", "FOLLOWER_LOG_AWAIT")


# --- a follower's log replication, followed on the wire without agent logs -------------------------------


def test_a_followers_replication_positions_on_the_wire_are_its_archives_signals():
    """i_restart_all_one_member_behind: member 1's AppendPositions of term 5 before it had the image of
    leader 0's term-5 log are the positions its archive signalled (EXTEND 56352, STOP 60480), each a few
    ms after the signal."""
    logged = [e for e in build(_folder("i_restart_all_one_member_behind").inputs(agent_logs=True)).events
              if e.type == "RecordingSignal" and e.node == 1 and e.fields["signal"] in ("EXTEND", "STOP")
              and 1795462016e9 < e.ts < 1795462017e9]
    start = [e for e in build(_folder("i_restart_all_one_member_behind").inputs(agent_logs=False)).events
             if e.type == "MemberStart" and e.node == 1][-1]
    seen = start.fields["replicationPositionsNs"]
    assert [position for _, position in seen] == [e.fields["position"] for e in logged] == [56352, 60480]
    assert all(0 <= at - e.ts < 5 * MS for (at, _), e in zip(seen, logged, strict=True))


def test_a_follower_replicates_its_log_for_as_long_as_the_wire_shows_without_agent_logs():
    """i_restart_all_one_member_behind, pcap + dirs only: member 1 replicated 56352 -> 60480 from leader
    0's archive for 1.17 s (FOLLOWER_LOG_REPLICATION 19:26:55.383 -> CANVASS 19:26:56.557), then caught
    up.  Taking the replication as done when made, the model went on at once and skipped the catch-up."""
    logged_events = build(_folder("i_restart_all_one_member_behind").inputs(agent_logs=True)).events
    events, records = _replayed("i_restart_all_one_member_behind", agent_logs=False)
    since = int(1795462010e9)
    logged = [s for s in _logged_states(logged_events, 1) if s[0] > since]
    modelled = [s for s in _model_states(records, 1) if s[0] > since]
    assert [s[1:] for s in modelled] == [s[1:] for s in logged]
    ended = [(m[0], r[0]) for m, r in zip(modelled, logged, strict=True) if m[1] == "FOLLOWER_LOG_REPLICATION"]
    assert len(ended) == 1 and abs(ended[0][0] - ended[0][1]) < 5 * MS


def test_only_the_follower_that_canvassed_after_its_leaders_log_ended_made_an_election_without_agent_logs():
    """h_five_members_leader_kill, pcap + dirs only, SIGTERM to all: leader 0's log ended at 19:25:48.666.
    Member 4 canvassed at .7076 (its agent log: election at .699, its archive's recording stopped at the
    end of stream); members 1, 2 and 3, closing, sent nothing more before the capture ended at .761 and
    made no election.  Acting on the end of stream itself, the model's 1, 2 and 3 went into elections."""
    events, records = _replayed("h_five_members_leader_kill", agent_logs=False)
    shutdown = 1795461948e9
    late = {r["node"]: r["ts"] for r in records if r["kind"] == "election" and r["ts"] > shutdown}
    assert list(late) == [4] and abs(late[4] - 1795461948699e6) < 20 * MS


def test_a_followers_log_replay_lasts_until_its_catchup_position_without_agent_logs():
    """h_five_members_leader_kill, pcap + dirs only: member 3's restarted process replayed its log for
    723 ms (FOLLOWER_REPLAY 19:25:40.272 -> FOLLOWER_CATCHUP_INIT .996) and sent its CatchupPosition at
    41.017, having sent nothing since its canvass.  Taken as done at once, the model's replay ended, and
    its CatchupPosition went out, 0.75 s early."""
    logged_events = build(_folder("h_five_members_leader_kill").inputs(agent_logs=True)).events
    events, records = _replayed("h_five_members_leader_kill", agent_logs=False)
    since = int(1795461940e9)
    logged = _logged_change(logged_events, 3, "FOLLOWER_CATCHUP_INIT", after=since)
    modelled = next(ts for ts, _, to in _model_states(records, 3) if to == "FOLLOWER_CATCHUP_INIT" and ts > since)
    assert 0 <= modelled - logged < 50 * MS


def test_a_followers_catch_up_join_is_over_at_its_first_append_position_after_the_image_without_agent_logs():
    """j_short_timeouts_leader_kill, pcap + dirs only: restarted member 0 had the catch-up image at
    19:27:56.630 and its services joined at .691 (agent log); its first AppendPosition to leader 1 left at
    .693.  Joined at the image, the model's member 0 reported the catch-up 60 ms early."""
    logged_events = build(_folder("j_short_timeouts_leader_kill").inputs(agent_logs=True)).events
    events, records = _replayed("j_short_timeouts_leader_kill", agent_logs=False)
    since = int(1795462075e9)
    logged = _logged_change(logged_events, 0, "FOLLOWER_CATCHUP", after=since)
    modelled = next(ts for ts, _, to in _model_states(records, 0) if to == "FOLLOWER_CATCHUP" and ts > since)
    assert 0 <= modelled - logged < 5 * MS
    assert not [r for r in records if r["kind"] == "divergence"]


def test_a_rejoining_follower_that_first_reports_its_join_position_had_its_recorder_start_later():
    """f_follower_kill_rejoin_catchup, pcap + dirs only: rejoining member 0's first AppendPosition after
    its catch-up join reported 8320, the position its CatchupPosition asked from (its archive's recorder
    started 1.6 ms after its services joined), and only then the catch-up; the model reports the same."""
    events, records = _replayed("f_follower_kill_rejoin_catchup", agent_logs=False)
    restarted = [e.ts for e in events if e.type == "MemberStart" and e.node == 0][-1]
    recorded = [e.fields["logPosition"] for e in events if e.node == 0 and e.dir == "out"
                and e.type == "AppendPosition" and e.ts > restarted][:2]
    modelled = [r["fields"]["logPosition"] for r in records if r["kind"] == "send" and r["node"] == 0
                and r["type"] == "AppendPosition" and r["ts"] > restarted][:2]
    assert modelled == recorded and recorded[0] == 8320 < recorded[1]


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


# --- a member whose module closed handles nothing more ----------------------------------------------------

CLOSED_AT_THE_END = """\
[1.000000000] log started 2026-01-01 00:00:00.000+0000
[1.100000000] CLUSTER: ELECTION_STATE_CHANGE [79/79]: memberId=0 INIT -> CANVASS leaderId=-1 candidateTermId=-1 \
leadershipTermId=-1 logPosition=0 logLeadershipTermId=-1 appendPosition=0 catchupPosition=-1 reason=
[1.400000000] CLUSTER: STATE_CHANGE [24/24]: memberId=0 ACTIVE -> CLOSED
"""


def test_a_last_life_that_stopped_cleanly_ends_in_a_member_stop():
    from recorder.capture import _final_stop

    parsed = parse_agent_log(CLOSED_AT_THE_END, source="n0.log")
    stop = _final_stop(parsed, ())
    closed = next(e for e in agent_log_events(parsed) if e.type == "StateChange" and e.fields["to"] == "CLOSED")
    assert (stop.type, stop.node, stop.ts) == ("MemberStop", 0, closed.ts + 1)
    assert "reached CLOSED" in stop.extra["evidence"][0]
    assert _final_stop(parsed, (closed.ts + 100 * MS,)) is None  # a death already found there (`_restarts`)
    assert _final_stop(parse_agent_log(CLOSED_AT_THE_END.replace("ACTIVE -> CLOSED", "ACTIVE -> SUSPENDED"),
                                       source="n0.log"), ()) is None


def test_a_leader_whose_module_closed_answers_no_canvass_position():
    """h_five_members_leader_kill, SIGTERM to all at 19:25:48.57: leader 0's module reached CLOSED at
    48.6526 (its agent log's STATE_CHANGE); member 4, whose log recording then stopped at the end of
    leader 0's log, entered an election and its CanvassPosition reached member 0 at 48.7076.  The real
    leader sent nothing more; the model, still running it, answered with a NewLeadershipTerm (the one
    extra send of h's conformance figures)."""
    events, records = _replayed("h_five_members_leader_kill")
    stop = [e for e in events if e.node == 0 and e.type == "MemberStop"]
    closed = [e for e in events if e.node == 0 and e.type == "StateChange" and e.fields.get("to") == "CLOSED"]
    assert len(stop) == 1 and stop[0].ts == closed[-1].ts + 1
    assert not [e for e in events if e.node == 0 and e.dir == "in" and e.ts >= stop[0].ts]
    recorded = [e.ts for e in events if e.node == 0 and e.dir == "out" and e.type == "NewLeadershipTerm"]
    modelled = [r["ts"] for r in records if r["kind"] == "send" and r["node"] == 0 and r["type"] == "NewLeadershipTerm"]
    assert max(recorded) < stop[0].ts and max(modelled) < stop[0].ts
