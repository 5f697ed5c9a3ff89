"""Agent logs → local observation events, and their clocks aligned on the capture's timeline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from formats.errors import DecodeError
from formats.events import Event
from recorder.capture import load_captures
from recorder.capture.agent_log_import import (
    agent_log_events,
    align_agent_log,
    looks_like_agent_log,
    parse_agent_log,
    read_agent_log_file,
    receipt_order,
)
from recorder.capture.align import MS
from recorder.capture.members import MemberMap
from recorder.capture.pcap_import import import_pcaps

SAMPLE = """\
[10.000000000] log started 2026-01-01 00:00:00.500+0000
[10.100000000] DRIVER: CMD_IN_ADD_COUNTER [1/1]: typeId=1
[10.200000000] CLUSTER: ELECTION_STATE_CHANGE [79/79]: memberId=2 INIT -> CANVASS leaderId=-1 candidateTermId=-1 \
leadershipTermId=-1 logPosition=0 logLeadershipTermId=-1 appendPosition=0 catchupPosition=-1 reason=
this line is not an agent line
[10.300000000] CLUSTER: NEW_LEADERSHIP_TERM [89/89]: memberId=2 logLeadershipTermId=-1 nextLeadershipTermId=0 \
nextTermBaseLogPosition=0 nextLogPosition=-1 leadershipTermId=0 termBaseLogPosition=0 logPosition=0 \
leaderRecordingId=-1 timestamp=7 leaderId=1 logSessionId=5 appVersion=0.0.1 isStartup=true
[3.000000000] log started 2026-01-01 00:01:00.000+0000
[3.500000000] CLUSTER: ROLE_CHANGE [29/29]: memberId=2 FOLLOWER -> CANDIDATE
"""
EPOCH_2026 = 1767225600  # 2026-01-01T00:00:00Z


def test_cluster_lines_become_local_observations_at_the_member_they_name():
    parsed = parse_agent_log(SAMPLE, source="n2.log")
    assert parsed.node == 2
    events = agent_log_events(parsed)
    assert [(e.node, e.dir, e.channel, e.type) for e in events] == [
        (2, "local", "local", "ElectionStateChange"),
        (2, "local", "local", "AgentEvent"),
        (2, "local", "local", "RoleChange"),
    ]
    change, term, role = events
    assert change.fields["from"] == "INIT" and change.fields["to"] == "CANVASS" and change.fields["reason"] == ""
    assert change.fields["catchupPosition"] == -1
    assert term.fields["event"] == "NEW_LEADERSHIP_TERM" and term.fields["appVersion"] == 1
    assert term.fields["isStartup"] == "TRUE"  # BooleanType names, as the decoded messages' columns hold them
    assert role.fields == {"memberId": 2, "from": "FOLLOWER", "to": "CANDIDATE"}
    assert change.extra == {"line": 3, "nanoTime": 10_200_000_000}


def test_each_log_started_line_starts_a_new_clock():
    events = agent_log_events(parse_agent_log(SAMPLE, source="n2.log"))
    first_offset = (EPOCH_2026 * 1000 + 500) * MS - 10_000_000_000
    second_offset = (EPOCH_2026 + 60) * 1000 * MS - 3_000_000_000
    assert events[0].ts == 10_200_000_000 + first_offset
    assert events[2].ts == 3_500_000_000 + second_offset
    assert events[2].ts > events[1].ts  # the restarted JVM's small nanoTime still lands later


def test_unreadable_lines_are_reported_by_line_and_other_contexts_counted():
    parsed = parse_agent_log(SAMPLE, source="n2.log")
    assert [(p.file, p.line) for p in parsed.problems] == [("n2.log", 4)]
    assert parsed.skipped == {"DRIVER lines": 1}


def test_a_file_without_cluster_events_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "driver-only.log"
    path.write_text("[1.000000000] DRIVER: CMD_IN_ADD_COUNTER [1/1]: typeId=1\n")
    with pytest.raises(DecodeError, match="driver-only.log: no aeron-agent CLUSTER events"):
        read_agent_log_file(path)


def test_agent_logs_are_recognised_by_their_first_line():
    assert looks_like_agent_log(b"[1184.908972446] log started 2026-11-22 01:49:46.563+0000\n")
    assert not looks_like_agent_log(b'{"ts": 1, "node": 0}\n')
    assert not looks_like_agent_log(b"[1.5] something\n")
    # Aeron up to 1.43 prints microseconds (the real 1.41.7 logs), 1.50 lists the loggers' versions.
    assert looks_like_agent_log(b"[6196.502881] log started 2026-11-23 20:40:19.447+0000\n")
    assert looks_like_agent_log(b"[5997.177216352] log started 2026-11-23 20:37:00.122+0000, enabled loggers: {}\n")


def test_a_parsed_log_says_its_dialect_and_the_version_it_names():
    old = parse_agent_log("[6196.502881] log started 2026-11-23 20:40:19.447+0000\n"
                          "[6201.321577] CLUSTER: STATE_CHANGE [22/22]: memberId=1 INIT -> ACTIVE\n", source="x")
    assert (old.dialect, old.implied_versions, old.aeron_version) == ("1.40-1.43", "1.40–1.43", None)
    assert old.records[0].ts_ns == 6201_321577_000
    new = parse_agent_log('[5997.177216352] log started 2026-11-23 20:37:00.122+0000, enabled loggers: {CLUSTER:'
                          ' version=1.50.4 commit=ad55}\n[6001.226887208] CLUSTER: ROLE_CHANGE [33/33]: memberId=1'
                          ' FOLLOWER -> CANDIDATE reason=""\n', source="y")
    assert (new.dialect, new.aeron_version, new.node) == ("1.50", "1.50.4", 1)
    assert new.records[0].fields["to"] == "CANDIDATE"


# --- the real capture -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real(capture):
    text = (capture.parent / "README.md").read_text()
    members = MemberMap.parse(re.search(r"`(0,127\.0\.0\.1:[^`]+)`", text).group(1))
    captured = import_pcaps([capture / "capture.pcap"], members)
    logs = {}
    for node in (0, 1, 2):
        parsed = read_agent_log_file(capture / f"node{node}" / "agent-events.log")
        align_agent_log(parsed, captured.events)
        logs[node] = parsed
    return captured, logs


def _alignment(logs, node):
    (segment,) = logs[node].segments
    return segment.alignment


def test_each_real_log_is_aligned_on_the_capture_within_a_stated_bound_under_half_a_millisecond(real):
    _, logs = real
    for node in (0, 1, 2):
        alignment = _alignment(logs, node)
        assert alignment.method == "capture"
        assert alignment.lower_pairs > 100 and alignment.discarded_pairs == 0
        assert alignment.high_ns is not None and 0 < alignment.bound_ns < MS // 2, alignment


def test_the_three_logs_of_one_host_agree_on_one_clock_within_their_bounds(real):
    # The three JVMs ran on one host, where System.nanoTime() is the same monotonic clock: the true
    # offset is the same for all three, so the intervals aligned independently must overlap.
    _, logs = real
    intervals = [(a.offset_ns + a.low_ns, a.offset_ns + a.high_ns) for a in (_alignment(logs, n) for n in (0, 1, 2))]
    assert max(low for low, _ in intervals) <= min(high for _, high in intervals)


def test_aligned_logs_keep_cause_before_effect_across_members(real):
    captured, logs = real
    events = {node: agent_log_events(logs[node]) for node in (0, 1, 2)}
    became_candidate = next(e.ts for e in events[1] if e.type == "ElectionStateChange"
                            and e.fields["to"] == "CANDIDATE_BALLOT")
    for follower in (0, 2):
        got_request = next(e.ts for e in events[follower] if e.type == "AgentEvent"
                           and e.fields["event"] == "REQUEST_VOTE")
        packet = next(e.ts for e in captured.events if e.node == follower and e.dir == "in" and e.type == "RequestVote")
        assert became_candidate < packet <= got_request
    # Every receipt line lands at or after the packet that carried it.
    got_votes = [e.ts for e in events[0] if e.type == "AgentEvent" and e.fields["event"] == "COMMIT_POSITION"]
    commits = [e.ts for e in captured.events if e.node == 0 and e.dir == "in" and e.type == "CommitPosition"]
    assert len(got_votes) == len(commits) and all(log >= packet for log, packet in zip(got_votes, commits, strict=True))


def test_without_a_capture_logs_are_aligned_by_their_start_line_to_the_millisecond(capture):
    offsets = []
    for node in (0, 1, 2):
        parsed = read_agent_log_file(capture / f"node{node}" / "agent-events.log")
        alignment = _alignment({0: parsed}, 0)
        assert alignment.method == "log started" and alignment.bound_ns == MS
        offsets.append(alignment.offset_ns)
    # One host, one nanoTime clock: the start lines (ms, truncated) agree to within a millisecond.
    assert max(offsets) - min(offsets) < MS


def test_every_election_state_change_of_the_real_logs_becomes_an_event(real, capture):
    _, logs = real
    for node in (0, 1, 2):
        lines = (capture / f"node{node}" / "agent-events.log").read_text().count("ELECTION_STATE_CHANGE")
        changes = [e for e in agent_log_events(logs[node]) if e.type == "ElectionStateChange"]
        assert len(changes) == lines == 8
        assert changes[-1].fields["to"] == "CLOSED" and all(e.node == node for e in changes)


def test_with_nothing_captured_the_start_line_estimate_stands(capture: Path):
    log = (capture / "node0" / "agent-events.log").read_text()
    parsed = parse_agent_log(log, source="node0")
    align_agent_log(parsed, [])  # nothing captured: the start line's estimate stays
    assert parsed.segments[0].alignment.method == "log started"


RESTARTED = """\
[100.000000000] log started 2026-01-01 00:00:00.000+0000
[100.100000000] CLUSTER: NEW_ELECTION [44/44]: memberId=1 leadershipTermId=-1 logPosition=0 appendPosition=0 \
reason=node started
[101.000000000] CLUSTER: ROLE_CHANGE [29/29]: memberId=1 FOLLOWER -> CANDIDATE
[50.000000000] log started 2026-01-01 00:00:05.000+0000
[50.200000000] CLUSTER: NEW_ELECTION [44/44]: memberId=1 leadershipTermId=0 logPosition=0 appendPosition=64 \
reason=node started
"""


def test_a_second_log_started_line_is_the_member_crashing_and_starting_again(tmp_path):
    path = tmp_path / "node1.log"
    path.write_text(RESTARTED)
    load = load_captures([path], members="0,h:1,h:2,h:3,h:4,h:5|1,h:11,h:12,h:13,h:14,h:15")
    lives = [(e.type, e.ts - EPOCH_2026 * 1_000_000_000) for e in load.events
             if e.type in ("MemberStart", "MemberCrash", "MemberStop")]
    assert lives == [("MemberCrash", 1_000_000_001), ("MemberStart", 5_200_000_000)]
    restart = next(e for e in load.events if e.type == "MemberStart")
    # The files the member wrote itself carry over; how far its log reached it said itself.
    assert restart.fields == {"clusterMembers": "0,h:1,h:2,h:3,h:4,h:5|1,h:11,h:12,h:13,h:14,h:15",
                              "appendPosition": 64}
    assert restart.extra["restart"] is True
    assert restart.extra["startingState"]["appendPosition"]["source"] == "agent log"
    assert any("crashed" in note for note in load.notes)


def test_a_member_whose_log_shows_it_closing_stopped_rather_than_crashed(tmp_path):
    path = tmp_path / "node1.log"
    path.write_text(RESTARTED.replace(
        "[101.000000000] CLUSTER: ROLE_CHANGE [29/29]: memberId=1 FOLLOWER -> CANDIDATE",
        "[101.000000000] CLUSTER: STATE_CHANGE [29/29]: memberId=1 TERMINATING -> CLOSED"))
    load = load_captures([path])
    assert [e.type for e in load.events if e.type.startswith("Member")] == ["MemberStop", "MemberStart"]


# --- the order in which a member handled what it received --------------------------------------------------


def _vote_request(ts: int, candidate: int) -> Event:
    return Event(ts=ts, node=0, dir="in", peer=candidate, channel="consensus", type="RequestVote",
                 fields={"logLeadershipTermId": -1, "logPosition": 0, "candidateTermId": 0, "candidateMemberId": candidate,
                         "protocolVersion": 65536})


def _logged_request(ts: int, candidate: int) -> Event:
    return Event(ts=ts, node=0, dir="local", peer=None, channel="local", type="AgentEvent",
                 fields={"event": "REQUEST_VOTE", "memberId": 0, "logLeadershipTermId": -1, "logPosition": 0,
                         "candidateTermId": 0, "candidateId": candidate, "protocolVersion": 65536})


def test_requests_the_agent_log_shows_handled_in_another_order_swap_their_times():
    # As in the real 1.50.4 capture: 1's request was captured first, 2's was handled first.
    received = [_vote_request(100, 1), _vote_request(238, 2)]
    assert receipt_order(received, [_logged_request(2_700, 2), _logged_request(3_300, 1)]) == {0: 238, 1: 100}
    assert receipt_order(received, [_logged_request(2_700, 1), _logged_request(3_300, 2)]) == {}
    assert receipt_order(received, []) == {}


def test_each_snapshot_is_timed_from_entering_snapshot_to_leaving_it_and_a_shutdowns_is_named():
    log = ("[6196.502881] log started 2026-11-23 20:40:19.447+0000\n"
           "[6201.000000] CLUSTER: STATE_CHANGE [22/22]: memberId=0 INIT -> ACTIVE\n"
           "[6202.000000] CLUSTER: STATE_CHANGE [26/26]: memberId=0 ACTIVE -> SNAPSHOT\n"
           "[6202.250000] CLUSTER: STATE_CHANGE [26/26]: memberId=0 SNAPSHOT -> ACTIVE\n"
           "[6210.000000] CLUSTER: STATE_CHANGE [26/26]: memberId=0 ACTIVE -> SNAPSHOT\n"
           "[6211.900000] CLUSTER: STATE_CHANGE [29/29]: memberId=0 SNAPSHOT -> TERMINATING\n")
    segment = parse_agent_log(log, source="node0").segments[0]
    assert segment.snapshot_durations == [250_000_000, 1_900_000_000]
    assert segment.shutdown_snapshot == 1
    follower = parse_agent_log(log.replace("SNAPSHOT -> TERMINATING", "SNAPSHOT -> ACTIVE"), source="node1")
    assert follower.segments[0].shutdown_snapshot is None
