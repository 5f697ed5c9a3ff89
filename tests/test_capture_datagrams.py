"""The shared datagram decoder: Aeron frames on the wire → recount events, built from genuine frames."""

from __future__ import annotations

from dataclasses import dataclass, field

from formats import cluster_codecs as cc
from formats.events import Event
from formats.udp import (
    SM_SEND_SETUP_FLAG,
    SetupFrame,
    StatusMessage,
    encode_datagram,
    encode_frame,
    fragment_message,
    heartbeat,
)
from recorder.capture.datagrams import DatagramDecoder, Streams
from recorder.capture.members import MemberMap
from recorder.record.reader import Datagram

MEMBERS = MemberMap.parse(
    "0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
    "1,127.0.0.1:20102,127.0.0.1:20103,127.0.0.1:20104,127.0.0.1:20105,127.0.0.1:20101|"
    "2,127.0.0.1:20202,127.0.0.1:20203,127.0.0.1:20204,127.0.0.1:20205,127.0.0.1:20201"
)
HOSTS = MemberMap.parse(
    "0,10.0.0.1:9002,10.0.0.1:9003,10.0.0.1:9004,10.0.0.1:9005,10.0.0.1:9001|"
    "1,10.0.0.2:9002,10.0.0.2:9003,10.0.0.2:9004,10.0.0.2:9005,10.0.0.2:9001|"
    "2,10.0.0.3:9002,10.0.0.3:9003,10.0.0.3:9004,10.0.0.3:9005,10.0.0.3:9001"
)


@dataclass
class Publication:
    """A sender's publication: turns messages into the datagrams Aeron would send."""

    src: tuple[str, int]
    dst: tuple[str, int]
    session_id: int
    stream_id: int
    initial_term_id: int = 7
    term_length: int = 65536
    mtu: int = 1408
    term_offset: int = 0
    sent: list[tuple[bytes, list]] = field(default_factory=list)

    def setup(self) -> bytes:
        return encode_frame(SetupFrame(term_offset=0, session_id=self.session_id, stream_id=self.stream_id,
                                       initial_term_id=self.initial_term_id, active_term_id=self.initial_term_id,
                                       term_length=self.term_length, mtu=self.mtu))

    def send(self, message: bytes) -> list[bytes]:
        frames = fragment_message(message, session_id=self.session_id, stream_id=self.stream_id,
                                  term_id=self.initial_term_id, term_offset=self.term_offset, mtu=self.mtu)
        self.term_offset = frames[-1].term_offset + ((frames[-1].frame_length + 31) & -32)
        return [encode_datagram([frame]) for frame in frames]

    def end_of_stream(self) -> bytes:
        return encode_frame(heartbeat(session_id=self.session_id, stream_id=self.stream_id,
                                      term_id=self.initial_term_id, term_offset=self.term_offset,
                                      end_of_stream=True))


class Wire:
    """Feeds datagrams to a decoder with increasing times and packet numbers."""

    def __init__(self, members: MemberMap = MEMBERS, **options) -> None:
        self.decoder = DatagramDecoder(members, **options)
        self.events: list[Event] = []
        self.packet = 0
        self.ts = 1_000_000_000

    def put(self, src, dst, payload: bytes, *, capture: int = 0, ts: int | None = None) -> list[Event]:
        self.packet += 1
        self.ts += 1000
        datagram = Datagram(self.ts if ts is None else ts, src[0], src[1], dst[0], dst[1], payload)
        out = self.decoder.feed(datagram, self.packet, capture=capture)
        self.events += out
        return out

    def publish(self, publication: Publication, message: bytes, **kw) -> list[Event]:
        out = []
        for payload in publication.send(message):
            out += self.put(publication.src, publication.dst, payload, **kw)
        return out

    def finish(self) -> list[Event]:
        events, _ = self.decoder.finish()
        self.events += events
        return events


def canvass(follower: int, position: int = 0) -> bytes:
    return cc.CanvassPosition(log_leadership_term_id=-1, log_position=position, leadership_term_id=-1,
                              follower_member_id=follower, protocol_version=65536).encode()


def consensus_publication(sender_port: int, receiver: int, session: int) -> Publication:
    return Publication(("127.0.0.1", sender_port), ("127.0.0.1", 20003 + 100 * receiver), session, 108)


def test_a_consensus_message_is_an_in_event_at_the_receiver_and_an_out_event_at_the_sender():
    wire = Wire()
    publication = consensus_publication(40001, receiver=0, session=11)
    wire.put(publication.src, publication.dst, publication.setup())
    message = canvass(follower=2, position=64)
    wire.publish(publication, message)
    wire.finish()
    events = wire.events
    assert [(e.node, e.dir, e.peer, e.channel, e.type) for e in events] == [
        (2, "out", 0, "consensus", "CanvassPosition"),
        (0, "in", 2, "consensus", "CanvassPosition"),
    ]
    assert all(e.payload == message for e in events)
    assert events[1].fields["followerMemberId"] == 2 and events[1].fields["logPosition"] == 64
    assert events[1].extra == {"packet": 2}


def test_a_message_without_a_sender_field_takes_the_sender_its_publication_showed():
    wire = Wire()
    publication = consensus_publication(40001, receiver=2, session=11)
    leader_says = cc.CommitPosition(leadership_term_id=0, log_position=96, leader_member_id=1).encode()
    stop = cc.TerminationPosition(leadership_term_id=0, log_position=96).encode()
    wire.publish(publication, stop)  # sender unknown yet: waits
    assert wire.events == []
    wire.publish(publication, leader_says)
    wire.finish()
    in_time_order = sorted(wire.events, key=lambda e: e.ts)
    assert [(e.type, e.node, e.dir, e.peer) for e in in_time_order] == [
        ("TerminationPosition", 1, "out", 2),
        ("TerminationPosition", 2, "in", 1),
        ("CommitPosition", 1, "out", 2),
        ("CommitPosition", 2, "in", 1),
    ]
    assert in_time_order[0].ts < in_time_order[2].ts  # the earlier message keeps its own capture time


def test_a_sender_is_known_from_its_address_when_each_member_has_its_own_host():
    wire = Wire(HOSTS)
    publication = Publication(("10.0.0.2", 50000), ("10.0.0.1", 9003), 5, 108)
    wire.publish(publication, cc.StopCatchup(leadership_term_id=3, follower_member_id=0).encode())
    wire.finish()
    events = wire.events
    assert [(e.node, e.dir, e.peer) for e in events] == [(1, "out", 0), (0, "in", 1)]


def test_a_fragmented_message_is_reassembled_into_one_event():
    wire = Wire()
    endpoint = "aeron:udp?endpoint=127.0.0.1:20005|" + "x" * 3000
    message = cc.CatchupPosition(leadership_term_id=2, log_position=4096, follower_member_id=0,
                                 catchup_endpoint=endpoint).encode()
    publication = consensus_publication(40001, receiver=1, session=3)
    wire.put(publication.src, publication.dst, publication.setup())
    datagrams = publication.send(message)
    assert len(datagrams) == 3
    for payload in datagrams:
        wire.put(publication.src, publication.dst, payload)
    wire.finish()
    received = [e for e in wire.events if e.dir == "in"]
    assert len(received) == 1
    assert received[0].fields["catchupEndpoint"] == endpoint
    assert received[0].payload == message
    assert received[0].extra["packet"] == 4  # completed by the last fragment


def test_retransmitted_and_duplicate_frames_do_not_become_duplicate_events():
    wire = Wire()
    publication = consensus_publication(40001, receiver=0, session=11)
    first = publication.send(canvass(1))
    second = publication.send(canvass(1, position=32))
    for payload in first + first + second + first + second:  # repeats, as a NAK-driven resend or an "any" capture
        wire.put(publication.src, publication.dst, payload)
    wire.finish()
    received = [e for e in wire.events if e.dir == "in"]
    assert [e.fields["logPosition"] for e in received] == [0, 32]


def test_out_of_order_frames_are_delivered_in_stream_order():
    wire = Wire()
    publication = consensus_publication(40001, receiver=0, session=11)
    wire.put(publication.src, publication.dst, publication.setup())
    a = publication.send(canvass(1, position=1))
    b = publication.send(canvass(1, position=2))
    for payload in b + a:
        wire.put(publication.src, publication.dst, payload)
    wire.finish()
    assert [e.fields["logPosition"] for e in wire.events if e.dir == "in"] == [1, 2]


def log_publication(receiver: int, session: int = -55) -> Publication:
    return Publication(("127.0.0.1", 33595), ("127.0.0.1", 20004 + 100 * receiver), session, 100,
                       initial_term_id=0, term_length=64 * 1024 * 1024)


def new_leadership_term(leader: int, log_session: int) -> bytes:
    return cc.NewLeadershipTerm(
        log_leadership_term_id=-1, next_leadership_term_id=0, next_term_base_log_position=0, next_log_position=-1,
        leadership_term_id=0, term_base_log_position=0, log_position=0, leader_recording_id=-1, timestamp=5,
        leader_member_id=leader, log_session_id=log_session, app_version=1, is_startup=cc.BooleanType.FALSE,
    ).encode()


def test_log_messages_are_in_events_at_the_follower_and_out_events_at_the_leader_with_the_log_position_after_them():
    wire = Wire()
    consensus = consensus_publication(40001, receiver=0, session=11)
    wire.publish(consensus, new_leadership_term(leader=1, log_session=-55))
    log = log_publication(receiver=0)
    wire.put(log.src, log.dst, log.setup())
    event = cc.NewLeadershipTermEvent(leadership_term_id=0, log_position=96, timestamp=5, term_base_log_position=0,
                                      leader_member_id=1, log_session_id=-55, time_unit=cc.ClusterTimeUnit.MILLIS,
                                      app_version=1).encode()
    header = cc.SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=6).encode() + b"hello"
    wire.publish(log, event)
    wire.publish(log, header)
    wire.finish()
    logged = [e for e in wire.events if e.channel == "log"]
    assert [(e.node, e.dir, e.peer, e.type, e.extra["logPosition"]) for e in logged] == [
        # The leader's appends as they left; what the follower received waits for its status message.
        (1, "out", 0, "NewLeadershipTermEvent", 96),
        (1, "out", 0, "SessionMessageHeader", 96 + 96),
        (0, "in", 1, "NewLeadershipTermEvent", 96),  # 8 + 48 bytes + 32 header = 88, aligned to 96
        (0, "in", 1, "SessionMessageHeader", 96 + 96),  # 32 + 5 bytes + 32 header = 69 → 96
    ]
    assert logged[3].payload.endswith(b"hello") and logged[1].payload == logged[3].payload


def test_a_log_stream_is_attributed_to_the_leader_its_session_id_names_even_when_seen_first():
    wire = Wire()
    log = log_publication(receiver=2, session=-99)
    wire.publish(log, cc.SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=6).encode())
    assert wire.events == []
    wire.publish(consensus_publication(40001, receiver=2, session=11), new_leadership_term(leader=1, log_session=-99))
    wire.finish()
    logged = [e for e in wire.events if e.channel == "log"]
    assert [(e.node, e.dir, e.peer) for e in logged] == [(1, "out", 2), (2, "in", 1)]


def test_end_of_stream_on_the_log_is_a_local_event_at_the_follower():
    wire = Wire()
    wire.publish(consensus_publication(40001, receiver=0, session=11), new_leadership_term(leader=1, log_session=-55))
    log = log_publication(receiver=0)
    wire.put(log.src, log.dst, log.setup())
    wire.publish(log, cc.TimerEvent(leadership_term_id=0, correlation_id=1, timestamp=2).encode())
    wire.put(log.src, log.dst, log.end_of_stream())
    wire.put(log.src, log.dst, log.end_of_stream())
    ends = [e for e in wire.events if e.type == "LogEndOfStream"]
    assert [(e.node, e.dir, e.channel, e.fields) for e in ends] == [
        (0, "local", "local", {"logSessionId": -55, "logPosition": 64})
    ]


def test_ingress_is_an_in_event_at_the_member_and_egress_an_out_event_at_the_leader():
    wire = Wire()
    ingress = Publication(("127.0.0.1", 36000), ("127.0.0.1", 20102), 900, 101)
    connect = cc.SessionConnectRequest(correlation_id=6, response_stream_id=102, version=768,
                                       response_channel="aeron:udp?endpoint=127.0.0.1:20900",
                                       encoded_credentials=b"").encode()
    wire.publish(ingress, connect)
    egress = Publication(("127.0.0.1", 37000), ("127.0.0.1", 20900), 901, 102)
    ok = cc.SessionEvent(cluster_session_id=1, correlation_id=6, leadership_term_id=0, leader_member_id=1,
                         code=cc.EventCode.OK, version=768, detail="").encode()
    wire.publish(egress, ok)
    wire.finish()
    assert sorted((e.node, e.dir, e.peer, e.channel, e.type) for e in wire.events) == [
        (1, "in", None, "ingress", "SessionConnectRequest"),
        (1, "out", None, "egress", "SessionEvent"),
    ]


def test_unknown_templates_other_schemas_and_corrupt_messages_are_counted_with_their_packet_number():
    wire = Wire()
    publication = consensus_publication(40001, receiver=0, session=11)
    unknown = bytes.fromhex("0800e7036f000c00") + bytes(8)  # templateId 999 of schema 111
    archive = bytes.fromhex("08000100650000a0") + bytes(8)  # schema 101
    truncated = canvass(1)[:20]
    good = canvass(1)
    for message in (unknown, archive, truncated, good):
        wire.publish(publication, message)
    wire.finish()
    assert [e.type for e in wire.events if e.dir == "in"] == ["CanvassPosition"]
    decoder = wire.decoder
    assert decoder.skipped == {"unknown template": 1, "other schema": 1, "corrupt message": 1}
    details = {p.category: (p.packet, p.detail) for p in decoder.problems}
    assert details["unknown template"][0] == 1 and "templateId 999" in details["unknown template"][1]
    assert details["other schema"][0] == 2 and "schema 101" in details["other schema"][1]
    assert details["corrupt message"][0] == 3 and "CanvassPosition" in details["corrupt message"][1]


def test_undecodable_datagrams_are_corrupt_frames_to_members_and_not_aeron_otherwise():
    wire = Wire()
    wire.put(("127.0.0.1", 40001), ("127.0.0.1", 20003), b"\x00\x00\x00\x00\x00\xc0\x01\x00")  # a cut DATA header
    wire.put(("192.168.0.5", 5353), ("224.0.0.251", 5353), b"\x00\x00\x84\x00 mdns answer")
    assert wire.events == []
    assert wire.decoder.skipped == {"corrupt frame": 1, "not Aeron": 1}
    corrupt, other = wire.decoder.problems
    assert corrupt.packet == 1 and corrupt.detail.startswith("not a valid Aeron frame (")
    assert other.packet == 2 and "is not Aeron traffic" in other.detail


def test_streams_to_other_endpoints_and_archive_streams_are_skipped_with_a_reason():
    wire = Wire()
    replication = Publication(("127.0.0.1", 41000), ("127.0.0.1", 20006), 77, 100)
    wire.publish(replication, cc.TimerEvent(leadership_term_id=0, correlation_id=1, timestamp=2).encode())
    archive = Publication(("127.0.0.1", 41001), ("127.0.0.1", 20001), 78, 10)
    wire.publish(archive, bytes(40))
    assert wire.events == []
    reasons = sorted(p.detail for p in wire.decoder.problems)
    assert reasons == [
        "archive traffic (stream 10, schema 101): not decoded",
        "stream 100 to 127.0.0.1:20006, which is no member endpoint: not decoded",
    ]


def test_stream_ids_are_configurable():
    wire = Wire(streams=Streams(consensus=208))
    publication = Publication(("127.0.0.1", 40001), ("127.0.0.1", 20003), 11, 208)
    wire.publish(publication, canvass(2))
    wire.finish()
    assert [e.dir for e in wire.events] == ["out", "in"]


def test_control_frames_are_counted_and_make_no_events():
    wire = Wire()
    sm = StatusMessage(session_id=11, stream_id=108, consumption_term_id=7, consumption_term_offset=0,
                       receiver_window=65536, receiver_id=1)
    wire.put(("127.0.0.1", 20003), ("127.0.0.1", 40001), encode_frame(sm))
    assert wire.events == [] and wire.decoder.frames["SM"] == 1


def test_a_publication_numbered_next_to_a_members_others_is_that_members():
    wire = Wire()
    wire.publish(consensus_publication(40001, receiver=0, session=1000), canvass(2))
    egress = Publication(("127.0.0.1", 37000), ("127.0.0.1", 20900), 1004, 102)
    redirect = cc.SessionEvent(cluster_session_id=-1, correlation_id=6, leadership_term_id=0, leader_member_id=1,
                               code=cc.EventCode.REDIRECT, version=768, detail="").encode()
    wire.publish(egress, redirect)  # REDIRECT does not come from the leader: wait for more evidence
    wire.finish()
    egress_events = [e for e in wire.events if e.channel == "egress"]
    assert [(e.node, e.dir) for e in egress_events] == [(2, "out")]
    assert any("session id is next to" in note for note in wire.decoder.notes)


def test_a_message_whose_sender_never_becomes_known_is_kept_with_a_null_peer():
    wire = Wire()
    publication = consensus_publication(40001, receiver=0, session=5_000_000)
    wire.publish(publication, cc.TerminationPosition(leadership_term_id=0, log_position=1).encode())
    wire.finish()
    assert [(e.node, e.dir, e.peer) for e in wire.events] == [(0, "in", None)]
    assert wire.decoder.skipped["unattributed"] == 1


def test_with_host_captures_each_member_gets_its_events_from_its_own_host_capture():
    wire = Wire(HOSTS, local_members={0: frozenset({0}), 1: frozenset({1})})
    message = canvass(1)
    # Member 1 sends to member 0; both hosts captured the datagram, at their own clock.
    for capture, ts in ((1, 5000), (0, 7000)):
        publication = Publication(("10.0.0.2", 50000), ("10.0.0.1", 9003), 5, 108)
        for payload in publication.send(message):
            wire.put(publication.src, publication.dst, payload, capture=capture, ts=ts)
    wire.finish()
    assert [(e.node, e.dir, e.ts) for e in wire.events] == [(1, "out", 5000), (0, "in", 7000)]


def test_a_member_whose_host_was_not_captured_gets_each_message_once():
    wire = Wire(HOSTS, local_members={0: frozenset({0}), 1: frozenset()})
    publication_a = Publication(("10.0.0.3", 50000), ("10.0.0.1", 9003), 5, 108)
    publication_b = Publication(("10.0.0.3", 50000), ("10.0.0.1", 9003), 5, 108)
    for payload in publication_a.send(canvass(2)):
        wire.put(publication_a.src, publication_a.dst, payload, capture=0, ts=100)
    for payload in publication_b.send(canvass(2)):
        wire.put(publication_b.src, publication_b.dst, payload, capture=1, ts=900)  # a mirror port saw it too
    wire.finish()
    assert [(e.node, e.dir, e.ts) for e in wire.events] == [(2, "out", 100), (0, "in", 100)]


def status(wire: Wire, publication: Publication, *, flags: int = 0, ts: int | None = None) -> list[Event]:
    """The receiver's status message back to the publisher (SEND_SETUP flag: it has no image)."""
    sm = StatusMessage(session_id=publication.session_id, stream_id=publication.stream_id,
                       consumption_term_id=publication.initial_term_id, consumption_term_offset=0,
                       receiver_window=65536, receiver_id=1, flags=flags)
    return wire.put(publication.dst, publication.src, encode_frame(sm), ts=ts)


def test_an_in_event_is_released_when_the_receiver_shows_it_was_alive_to_receive_it():
    wire = Wire()
    publication = consensus_publication(40001, receiver=0, session=11)
    wire.put(publication.src, publication.dst, publication.setup())
    assert [e.dir for e in wire.publish(publication, canvass(2))] == ["out"]
    assert [(e.node, e.dir) for e in status(wire, publication)] == [(0, "in")]


def test_what_reaches_a_restarted_member_before_it_asks_for_a_setup_is_not_received():
    wire = Wire()
    publication = consensus_publication(40001, receiver=0, session=11)
    wire.put(publication.src, publication.dst, publication.setup(), ts=1_000_000_000)
    wire.publish(publication, canvass(2, position=1), ts=1_000_000_100)
    status(wire, publication, ts=1_000_000_200)  # member 0 alive: the first canvass was received
    wire.publish(publication, canvass(2, position=2), ts=1_050_000_000)  # just after: it may still be up
    wire.publish(publication, canvass(2, position=3), ts=2_000_000_000)  # member 0 down (silent for a second)
    # Member 0 restarted: it has no image, and asks for a SETUP when the next data comes.
    wire.publish(publication, canvass(2, position=4), ts=3_000_000_000)
    status(wire, publication, flags=SM_SEND_SETUP_FLAG, ts=3_000_000_001)
    wire.publish(publication, canvass(2, position=5), ts=3_000_000_002)  # dropped: no image yet
    restart_setup = SetupFrame(term_offset=publication.term_offset, session_id=11, stream_id=108,
                               initial_term_id=7, active_term_id=7, term_length=65536, mtu=1408)
    wire.put(publication.src, publication.dst, encode_frame(restart_setup),
             ts=3_000_000_003)
    wire.publish(publication, canvass(2, position=6), ts=3_000_000_004)
    wire.finish()
    received = [e.fields["logPosition"] for e in wire.events if e.dir == "in"]
    assert received == [1, 2, 6]
    assert [e.fields["logPosition"] for e in wire.events if e.dir == "out"] == [1, 2, 3, 4, 5, 6]
    assert wire.decoder.skipped["not received"] == 2  # the two lost while down, then the one before the SETUP
    assert wire.decoder.frames["DATA before a new image's SETUP"] == 1
