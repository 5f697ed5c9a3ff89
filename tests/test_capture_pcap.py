"""pcap/pcapng import against the real Aeron 1.47.3 capture, and against broken captures we make."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from formats import cluster_codecs as cc
from formats.agent_log import AgentLogRecord, read_agent_log
from formats.errors import DecodeError
from formats.pcap import PcapReader, PcapWriter
from formats.udp import SetupFrame, encode_datagram, encode_frame, fragment_message
from recorder.capture.members import MemberMap
from recorder.capture.pcap_import import decode_captures, import_pcaps


def readme_members(capture: Path) -> str:
    """The members string as the capture's README gives it (read, not copied)."""
    text = (capture.parent / "README.md").read_text()
    return re.search(r"`(0,127\.0\.0\.1:[^`]+)`", text).group(1)


@pytest.fixture(scope="module")
def real(capture):
    members = MemberMap.parse(readme_members(capture))
    return import_pcaps([capture / "capture.pcap"], members)


def agent_records(capture: Path, node: int) -> list[AgentLogRecord]:
    log = read_agent_log((capture / f"node{node}" / "agent-events.log").read_text())
    return [r for r in log.records if type(r) is AgentLogRecord]


def received(events, node: int, kind: str):
    return [e for e in events if e.node == node and e.dir == "in" and e.type == kind]


def test_node_0_received_member_1s_request_vote_for_candidate_term_0(real, capture):
    logged = [r.fields for r in agent_records(capture, 0) if r.event == "REQUEST_VOTE"]
    assert [(f["candidateTermId"], f["candidateId"]) for f in logged] == [(0, 1)]
    votes = received(real.events, 0, "RequestVote")
    assert [(e.peer, e.fields["candidateTermId"], e.fields["candidateMemberId"]) for e in votes] == [(1, 0, 1)]


def test_node_1_received_yes_votes_from_members_0_and_2(real):
    votes = received(real.events, 1, "Vote")
    assert sorted((e.peer, e.fields["followerMemberId"], e.fields["candidateTermId"], e.fields["vote"])
                  for e in votes) == [(0, 0, 0, "TRUE"), (2, 2, 0, "TRUE")]
    # ... and each was sent by its voter, as an out event carrying the same bytes.
    sent = [e for e in real.events if e.type == "Vote" and e.dir == "out"]
    assert sorted((e.node, e.peer) for e in sent) == [(0, 1), (2, 1)]
    assert sorted(e.payload for e in sent) == sorted(e.payload for e in votes)


@pytest.mark.parametrize("node", [0, 2])
def test_every_new_leadership_term_the_follower_logged_is_a_received_event(real, capture, node):
    logged = [r.fields for r in agent_records(capture, node) if r.event == "NEW_LEADERSHIP_TERM"]
    assert len(logged) == 3
    events = received(real.events, node, "NewLeadershipTerm")
    rename = {"leaderId": "leaderMemberId"}
    as_logged = [
        {rename.get(k, k): (("TRUE" if v else "FALSE") if k == "isStartup" else v)
         for k, v in f.items() if k != "memberId"}
        for f in logged
    ]
    assert [{k: e.fields[k] for k in as_logged[0]} for e in events] == as_logged
    assert {e.peer for e in events} == {1}


def test_each_member_received_exactly_the_consensus_messages_its_agent_log_shows(real, capture):
    receipts = {"CANVASS_POSITION": "CanvassPosition", "REQUEST_VOTE": "RequestVote",
                "NEW_LEADERSHIP_TERM": "NewLeadershipTerm", "APPEND_POSITION": "AppendPosition",
                "COMMIT_POSITION": "CommitPosition", "TERMINATION_POSITION": "TerminationPosition",
                "TERMINATION_ACK": "TerminationAck"}
    for node in (0, 1, 2):
        logged = Counter(receipts[r.event] for r in agent_records(capture, node) if r.event in receipts)
        captured = Counter(e.type for e in real.events
                           if e.node == node and e.dir == "in" and e.channel == "consensus" and e.type != "Vote")
        assert captured == logged, node


def test_every_sent_consensus_message_is_also_received_by_its_peer(real):
    consensus = [e for e in real.events if e.channel == "consensus"]
    sent = Counter((e.node, e.peer, e.payload, e.extra["packet"]) for e in consensus if e.dir == "out")
    got = Counter((e.peer, e.node, e.payload, e.extra["packet"]) for e in consensus if e.dir == "in")
    assert sent == got and len(sent) > 500


def test_log_messages_carry_the_log_positions_the_members_processed_them_at(real, capture):
    for node in (0, 2):
        replayed = [r.fields for r in agent_records(capture, node) if r.event == "REPLAY_NEW_LEADERSHIP_TERM"]
        assert [(f["leadershipTermId"], f["logPosition"]) for f in replayed] == [(0, 96)]
        log = [e for e in real.events if e.node == node and e.channel == "log"]
        first = log[0]
        assert first.type == "NewLeadershipTermEvent" and first.extra["logPosition"] == 96 and first.peer == 1
        # node-stdout.log: the service printed every log message it processed with its timestamp and position.
        service = re.findall(r"SERVICE on\w+ .*?timestamp=(\d+).*?logPosition=(\d+)",
                             (capture / f"node{node}" / "node-stdout.log").read_text())
        positions = {(int(ts), int(position)) for ts, position in service}
        captured = {(e.fields["timestamp"], e.extra["logPosition"]) for e in log}
        assert len(positions) >= 100
        assert positions <= captured


def test_pcap_and_pcapng_of_the_same_packets_give_identical_events(real, capture):
    members = MemberMap.parse(readme_members(capture))
    from_pcapng = import_pcaps([capture / "capture.pcapng"], members)
    assert from_pcapng.events == real.events
    assert real.problems == [] and from_pcapng.problems == []


def test_a_capture_cut_short_keeps_every_event_before_the_cut_and_says_where(real, capture):
    data = (capture / "capture.pcap").read_bytes()
    packets = list(PcapReader(data).packets())
    cut_packet = packets[1000]
    cut = cut_packet.file_offset + 30  # in the middle of record 1001's header and data: tcpdump was killed
    members = MemberMap.parse(readme_members(capture))
    result = decode_captures([("cut.pcap", data[:cut])], members)
    assert result.files[0].truncated
    problem = [p for p in result.problems if p.category == "capture file"]
    assert len(problem) == 1 and problem[0].file == "cut.pcap" and problem[0].offset == cut_packet.file_offset

    def key(e):
        return (e.ts, e.node, e.dir, e.type, e.payload)

    before = [key(e) for e in real.events if e.extra["packet"] < cut_packet.index]
    assert [key(e) for e in result.events] == before


def test_a_corrupted_frame_loses_only_its_own_message_and_names_its_packet(real, capture):
    data = bytearray((capture / "capture.pcap").read_bytes())
    members = MemberMap.parse(readme_members(capture))
    victim = next(e for e in real.events if e.type == "RequestVote" and e.dir == "in")
    packet = next(p for p in PcapReader(bytes(data)).packets() if p.index == victim.extra["packet"])
    data[packet.payload_offset + 4] = 9  # the frame's version byte
    result = decode_captures([("bad.pcap", bytes(data))], members)
    (problem,) = [p for p in result.problems if p.category == "corrupt frame"]
    assert problem.packet == packet.index and problem.offset == packet.payload_offset + 4
    lost = [e for e in real.events if e.extra["packet"] == packet.index]
    assert [e for e in real.events if e not in lost] == result.events


def _pcap(records) -> bytes:
    writer = PcapWriter()
    return writer.file_header() + b"".join(writer.udp_packet(*r) for r in records)


def test_a_capture_of_unrelated_udp_traffic_is_refused_with_what_was_seen(capture):
    members = MemberMap.parse(readme_members(capture))
    data = _pcap([(1_000 + i, "192.168.1.2", 5353, "224.0.0.251", 5353, b"\x00\x00\x84\x00 query") for i in range(5)])
    with pytest.raises(DecodeError) as error:
        decode_captures([("mdns.pcap", data)], members)
    text = str(error.value)
    assert text.startswith("mdns.pcap: no Aeron cluster messages found") and "5 not Aeron" in text
    with pytest.raises(DecodeError, match="no Aeron cluster consensus traffic found"):
        decode_captures([("mdns.pcap", data)], None)


def _aeron_pcap(messages: list[bytes], *, session: int = 9, src_port: int = 40001) -> bytes:
    setup = SetupFrame(term_offset=0, session_id=session, stream_id=108, initial_term_id=0, active_term_id=0,
                       term_length=65536, mtu=1408)
    records = [(1_000, "127.0.0.1", src_port, "127.0.0.1", 20003, encode_frame(setup))]
    offset = 0
    for number, message in enumerate(messages):
        for frame in fragment_message(message, session_id=session, stream_id=108, term_id=0, term_offset=offset):
            records.append((2_000 + number, "127.0.0.1", src_port, "127.0.0.1", 20003, encode_datagram([frame])))
            offset = frame.term_offset + ((frame.frame_length + 31) & -32)
    return _pcap(records)


def test_unknown_template_ids_in_a_capture_are_counted_and_the_rest_decoded(capture):
    members = MemberMap.parse(readme_members(capture))
    good = cc.CanvassPosition(log_leadership_term_id=-1, log_position=0, leadership_term_id=-1,
                              follower_member_id=2, protocol_version=65536).encode()
    unknown = bytes.fromhex("08005a006f000c00") + bytes(8)  # templateId 90, which schema 111 v12 lacks
    result = decode_captures([("x.pcap", _aeron_pcap([unknown, good, unknown]))], members)
    assert [(e.node, e.dir, e.type) for e in result.events] == [(2, "out", "CanvassPosition"),
                                                                 (0, "in", "CanvassPosition")]
    assert result.summary.skipped == {"unknown template": 2}
    assert [p.packet for p in result.problems] == [2, 4]


def test_several_loopback_captures_of_one_host_give_each_message_once(capture):
    members = MemberMap.parse(readme_members(capture))
    good = cc.CanvassPosition(log_leadership_term_id=-1, log_position=0, leadership_term_id=-1,
                              follower_member_id=2, protocol_version=65536).encode()
    data = _aeron_pcap([good])
    result = decode_captures([("a.pcap", data), ("b.pcap", data)], members)
    assert [(e.node, e.dir) for e in result.events] == [(2, "out"), (0, "in")]
    assert all(f.local_members == (0, 1, 2) for f in result.files)



HOST_MEMBERS = (
    "0,10.0.0.1:9002,10.0.0.1:9003,10.0.0.1:9004,10.0.0.1:9005,10.0.0.1:9001|"
    "1,10.0.0.2:9002,10.0.0.2:9003,10.0.0.2:9004,10.0.0.2:9005,10.0.0.2:9001|"
    "2,10.0.0.3:9002,10.0.0.3:9003,10.0.0.3:9004,10.0.0.3:9005,10.0.0.3:9001"
)


def _canvass_datagrams(src_ip, dst_ip, session, follower):
    message = cc.CanvassPosition(log_leadership_term_id=-1, log_position=0, leadership_term_id=-1,
                                 follower_member_id=follower, protocol_version=65536).encode()
    setup = SetupFrame(term_offset=0, session_id=session, stream_id=108, initial_term_id=0, active_term_id=0,
                       term_length=65536, mtu=1408)
    (frame,) = fragment_message(message, session_id=session, stream_id=108, term_id=0, term_offset=0)
    return [(src_ip, 40000, dst_ip, 9003, encode_frame(setup)),
            (src_ip, 40000, dst_ip, 9003, encode_datagram([frame]))]


def test_captures_taken_on_each_host_give_each_member_its_own_hosts_view():
    one_to_zero = _canvass_datagrams("10.0.0.2", "10.0.0.1", 5, 1)
    zero_to_one = _canvass_datagrams("10.0.0.1", "10.0.0.2", 6, 0)
    two_to_zero = _canvass_datagrams("10.0.0.3", "10.0.0.1", 7, 2)
    two_to_one = _canvass_datagrams("10.0.0.3", "10.0.0.2", 8, 2)
    # Each host sees only its own traffic, stamped by its own clock (host 0 at 5_000, host 1 at 9_000).
    host0 = _pcap([(5_000 + i, *d) for i, d in enumerate(one_to_zero + zero_to_one + two_to_zero)])
    host1 = _pcap([(9_000 + i, *d) for i, d in enumerate(one_to_zero + zero_to_one + two_to_one)])
    result = decode_captures([("host0.pcap", host0), ("host1.pcap", host1)], MemberMap.parse(HOST_MEMBERS))
    assert [f.local_members for f in result.files] == [(0,), (1,)]
    assert sorted((e.node, e.dir, e.peer, e.ts) for e in result.events) == [
        (0, "in", 1, 5_001), (0, "in", 2, 5_005), (0, "out", 1, 5_003),
        (1, "in", 0, 9_003), (1, "in", 2, 9_005), (1, "out", 0, 9_001),
        (2, "out", 0, 5_005), (2, "out", 1, 9_005),  # member 2's host was not captured: seen from its peers
    ]


def test_captures_that_cannot_be_told_apart_are_used_once_and_said_so():
    members = MemberMap.parse(HOST_MEMBERS.rsplit("|", 1)[0])  # two members: both hosts in every datagram
    traffic = _canvass_datagrams("10.0.0.2", "10.0.0.1", 5, 1) + _canvass_datagrams("10.0.0.1", "10.0.0.2", 6, 0)
    result = decode_captures([("a.pcap", _pcap([(100 + i, *d) for i, d in enumerate(traffic)])),
                              ("b.pcap", _pcap([(900 + i, *d) for i, d in enumerate(traffic)]))], members)
    assert sorted((e.node, e.dir, e.ts) for e in result.events) == [
        (0, "in", 101), (0, "out", 103), (1, "in", 103), (1, "out", 101)]
    assert any("several captures" in note and "a.pcap" in note for note in result.notes)
