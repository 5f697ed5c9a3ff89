"""The bulk conversion of captures gives what the datagram-at-a-time reference gives, byte for byte.

`recount convert` decodes a capture's steady traffic as arrays (`recorder.capture.bulk`), keeps the
incident's events as columns (`formats.event_columns`) and writes the replay file a record batch at a
time.  The reference is the code it replaced, kept as ``bulk=False``: every datagram fed to the
decoder one at a time, an `Event` per event, `replay_file.events_to_table` and `write_table`.  These
tests convert every real capture (Aeron 1.47.3 and the other versions) and every sample both ways and
demand the same replay file bytes, events, problems, notes and summary; the same with the capture
read in small stretches (stretch boundaries everywhere), with a repeated capture (many streams, many
runs), and with the mutation fuzzer's damaged captures.  The evidence of the members' lives that the
decoder keeps beside the events (issue 12: ICMP port unreachable answers, each member's spans of
activity, its SETUP requests and consensus publications, `PcapImport.liveness`; when each consensus
publication's receiver answered it, when each log publication was first seen and each member's driver
had an image of the leader's log, read from status messages the bulk path never feeds to the decoder:
`PcapImport.consensus_publications`, ``log_publications``, ``log_images``) is compared too, and what
`recorder.capture` makes of it without agent logs (crashes and restarts read from the wire, what
reached a member while it was down dropped, starting states from its own first messages, connected
peers and ``PublicationStatus`` events), which the bulk conversion builds on columns, must be what the
reference builds on events.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import struct
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from formats import pcap
from formats.errors import DecodeError
from formats.event_columns import EventColumns
from formats.events import Event
from formats.pcap import PcapReader
from recorder import convert
from recorder.capture import CaptureLoad, bulk, load_captures
from recorder.capture.members import MemberMap
from recorder.capture.pcap_import import decode_captures
from recorder.evidence import coverage
from recorder.settings import ELECTION_TIMEOUT, _ballots_of_rows, _ballots_on_the_wire, infer_settings
from recorder.version_evidence import wire_evidence

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(p for p in (ROOT / "samples").iterdir() if (p / "summary.json").exists())


def _members_of(capture_dir: Path) -> str:
    # The version captures use "the same cluster configuration, ports, members string" as 1.47.3's.
    readme = (capture_dir.parent.parent / "aeron-1.47.3-capture" / "README.md").read_text()
    members = re.search(r"`(0,127\.0\.0\.1:[^`]+)`", readme).group(1)
    if capture_dir.name.startswith("h_"):
        members += "|" + re.search(r"`\|(3,127[^`]+)`", readme).group(1)
    return members


def _real_captures(reference: Path) -> list[Path]:
    dirs = sorted((reference / "aeron-1.47.3-capture").glob("*/capture.pcap"))
    dirs += sorted((reference / "aeron-versions-capture").glob("*/capture.pcap"))
    return [d.parent for d in dirs]


def _replay_bytes(built: convert.Built) -> bytes:
    sink = pa.BufferOutputStream()
    built.write(sink)
    return sink.getvalue().to_pybytes()


def _same_import(paths: list[Path], members: str | None) -> None:
    captures = [(str(p), p.read_bytes()) for p in paths]
    member_map = MemberMap.parse(members) if members else None
    fast = decode_captures(captures, member_map)
    reference = decode_captures(captures, member_map, bulk=False)
    assert fast.events == reference.events
    assert [p.to_json() for p in fast.problems] == [p.to_json() for p in reference.problems]
    assert fast.notes == reference.notes
    assert fast.summary == reference.summary
    assert [f.to_json() for f in fast.files] == [f.to_json() for f in reference.files]
    assert fast.liveness == reference.liveness
    assert _publication_evidence(fast) == _publication_evidence(reference)


def _publication_evidence(imported) -> tuple:
    """What the decoder read of the members' publications and images (issue 12 item 3)."""
    return imported.consensus_publications, imported.log_publications, imported.log_images


def _same_load(inputs: list[Path], members: str | None) -> CaptureLoad:
    """`load_captures` both ways: the same events and summary; the bulk one's, assembled as columns."""
    fast = load_captures(inputs, members=members)
    reference = load_captures(inputs, members=members, bulk=False)
    assert fast.columns is not None and reference.columns is None
    assert fast.summary() == reference.summary()
    assert fast.events == reference.events
    return fast


def _same_conversion(inputs: list[Path], members: str | None) -> None:
    fast = convert.build([str(p) for p in inputs], members=members)
    reference = convert.build([str(p) for p in inputs], members=members, bulk=False)
    assert _replay_bytes(fast) == _replay_bytes(reference)
    assert fast.result("x.arrow").to_json() == reference.result("x.arrow").to_json()
    assert fast.notes == reference.notes


# --- real captures and samples -------------------------------------------------------------------
def test_every_real_capture_converts_to_the_same_replay_file_in_bulk_and_one_datagram_at_a_time(reference):
    for directory in _real_captures(reference):
        members = _members_of(directory)
        _same_conversion([directory / "capture.pcap", *sorted(directory.glob("node*"))], members)  # + cluster dirs
        if directory.name in ("a_clean_start", "h_five_members_leader_kill"):
            _same_conversion([directory / "capture.pcap"], members)  # members starting empty
            _same_conversion([directory / "capture.pcapng"], members)


def test_a_real_capture_without_a_members_string_converts_the_same_both_ways(reference):
    _same_conversion([reference / "aeron-1.47.3-capture" / "f_follower_kill_rejoin_catchup" / "capture.pcap"], None)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_every_sample_converts_the_same_both_ways_host_by_host_and_all_hosts_together(sample):
    members = json.loads((sample / "summary.json").read_text())["clusterMembers"]
    hosts = sorted(sample.glob("host*.pcap"))
    _same_conversion(hosts[:1], members)
    _same_conversion(hosts, members)  # several captures: their datagrams fed one by one, events as columns
    _same_conversion([sample], None)  # the incident directory (agent logs too: the events as values)


def test_decoded_events_problems_and_notes_are_the_same_both_ways_for_every_real_capture(reference):
    for directory in _real_captures(reference):
        for name in ("capture.pcap", "capture.pcapng"):
            _same_import([directory / name], _members_of(directory))


def test_members_lives_read_from_the_wire_are_the_same_in_bulk_and_reach_the_bulk_replay(reference):
    """The evidence i12 reads from the wire comes out of the bulk decoder as out of the reference: the
    ICMP port unreachable answers (f and h kept ICMP), each member's spans of activity, its SETUP
    requests and consensus publications; and without agent logs the bulk load, assembled as columns,
    holds the same crashes, restarts, drops and starting states as the reference's events.

    So does what is read from the status messages that the bulk path passes over in runs: each
    consensus publication's status messages (when it was connected), each log publication's first
    sighting and each member's images of the leader's log; and the bulk load gives every life's
    MemberStart the same ``connectedPeers``, ``logPublicationsReadyNs``, ``logImagesNs``, ``leaderJoinsReadyNs``,
    ``shutdownSnapshot``, ``followerJoinsNs``, ``replicationPositionsNs`` and ``logReplaysDoneNs`` and the same
    ``PublicationStatus`` events as the reference (`_same_load` compares the events)."""
    kinds_seen: set[str] = set()
    for name in ("f_follower_kill_rejoin_catchup", "g_leader_sigterm_reelection_rejoin", "h_five_members_leader_kill",
                 "i_restart_all_one_member_behind", "j_short_timeouts_leader_kill"):
        directory = reference / "aeron-1.47.3-capture" / name
        members = _members_of(directory)
        captures = [(str(directory / "capture.pcap"), (directory / "capture.pcap").read_bytes())]
        fast = decode_captures(captures, MemberMap.parse(members))
        slow = decode_captures(captures, MemberMap.parse(members), bulk=False)
        liveness = fast.liveness
        assert liveness == slow.liveness
        assert all(alive.heard and alive.publications for alive in liveness.values())
        if any(alive.unreachable for alive in liveness.values()):
            kinds_seen.add("ICMP")
        if any(alive.setup_requests for alive in liveness.values()):
            kinds_seen.add("SETUP requests")
        assert _publication_evidence(fast) == _publication_evidence(slow)
        # Most status messages are passed over in runs: the evidence holds them all the same.
        assert sum(len(p.status_messages) for p in fast.consensus_publications) > 500, name
        assert fast.log_publications and fast.log_images, name
        load = _same_load([directory / "capture.pcap", *sorted(directory.glob("node*"))], members)
        events = load.events
        crashes = [e for e in events if e.type == "MemberCrash"]
        restarts = [e for e in events if e.type == "MemberStart" and (e.extra or {}).get("restart")]
        assert crashes and len(restarts) == len(crashes), name  # every one of these captures kills a member
        if any("ICMP port unreachable" in line for e in crashes for line in e.extra["evidence"]):
            kinds_seen.add("ICMP in a crash's evidence")
        starts = [e for e in events if e.type == "MemberStart" and not (e.extra or {}).get("restart")]
        assert all("startingState" in e.extra for e in starts)  # every member's cluster dir was given
        if any(note.endswith("were not delivered (dropped)") for note in load.notes):
            kinds_seen.add("dropped")
        lives = starts + restarts
        assert all("connectedPeers" in e.fields for e in lives), name  # every member's publications were answered
        if any(e.fields["connectedPeers"] for e in restarts):
            kinds_seen.add("peers connected at a restart")
        if any(e.fields["logPublicationsReadyNs"] for e in lives):
            kinds_seen.add("log publication ready")
        if any(e.fields["logImagesNs"] for e in lives):
            kinds_seen.add("log image")
        if any(e.fields.get("leaderJoinsReadyNs") for e in lives):
            kinds_seen.add("leader join over")
        if any(e.fields.get("shutdownSnapshot") is not None for e in lives):
            kinds_seen.add("shutdown")
        if any(e.fields.get("followerJoinsNs") for e in lives):
            kinds_seen.add("follower join never")
        if any(e.fields.get("replicationPositionsNs") for e in lives):
            kinds_seen.add("replication positions")
        if any(e.fields.get("logReplaysDoneNs") for e in lives):
            kinds_seen.add("log replay bound")
        changes = [e for e in events if e.type == "PublicationStatus"]
        kinds_seen.update("publication " + ("connected" if e.fields["connected"] else "not connected") for e in changes)
    assert kinds_seen == {"ICMP", "SETUP requests", "ICMP in a crash's evidence", "dropped",
                          "peers connected at a restart", "log publication ready", "log image",
                          "leader join over", "shutdown", "follower join never", "replication positions", "log replay bound", "publication connected", "publication not connected"}


def test_reading_the_capture_in_small_stretches_changes_nothing(reference, monkeypatch):
    """Stretch boundaries (4 MB in use) fall between any two records and inside a run; the messages read
    are grouped every few stretches (32 MB of them in use)."""
    monkeypatch.setattr(pcap, "SEGMENT_BYTES", 3000)
    monkeypatch.setattr(bulk, "STRETCH_BYTES", 2000)
    monkeypatch.setattr(bulk, "HELD_MESSAGE_BYTES", 5000)
    for name in ("f_follower_kill_rejoin_catchup", "g_leader_sigterm_reelection_rejoin"):
        directory = reference / "aeron-1.47.3-capture" / name
        _same_import([directory / "capture.pcap"], _members_of(directory))
        _same_conversion([directory / "capture.pcap"], _members_of(directory))


def _repeated(path: Path, copies: int, keep_ports: set[int]) -> bytes:
    """The capture ``copies`` times, each copy later by the capture's length and with its ephemeral
    ports moved (new publications), as benchmarks/bench_pcap_import.py builds its input."""
    data = path.read_bytes()
    reader = PcapReader(data)
    packets = list(reader.packets())
    span = (packets[-1].ts_ns - packets[0].ts_ns) // 1_000_000_000 + 1
    out = bytearray(data[:24])
    for copy in range(copies):
        chunk = bytearray(data[24:])
        offset = 0
        while offset < len(chunk):
            seconds, _, caplen, _ = struct.unpack_from("<IIII", chunk, offset)
            struct.pack_into("<I", chunk, offset, seconds + copy * span)
            offset += 16 + caplen
        for packet in packets:
            udp = packet.payload_offset - 24 - 8
            for at, port in ((udp, packet.src_port), (udp + 2, packet.dst_port)):
                if port not in keep_ports:
                    struct.pack_into("!H", chunk, at, (port + copy) % 65536)
        out += chunk
    return bytes(out)


def test_a_repeated_capture_with_many_streams_and_runs_converts_the_same_both_ways(reference, tmp_path):
    directory = reference / "aeron-1.47.3-capture" / "a_clean_start"
    members = _members_of(directory)
    member_map = MemberMap.parse(members)
    keep = {e.port for m in member_map.members for e in m.endpoints.values()} | {20900}
    path = tmp_path / "repeated.pcap"
    path.write_bytes(_repeated(directory / "capture.pcap", 5, keep))
    _same_import([path], members)
    _same_conversion([path], members)


def test_captures_the_fuzzer_damaged_decode_the_same_both_ways():
    from tests.fuzzing import make_input

    members = json.loads((ROOT / "samples" / "leader-failover" / "summary.json").read_text())["clusterMembers"]
    member_map = MemberMap.parse(members)
    compared = 0
    for index in range(120):
        data = make_input("pcap", 29, index)
        outcomes = []
        for fast in (True, False):
            try:
                result = decode_captures([("x.pcap", data)], member_map, bulk=fast)
            except DecodeError as error:
                outcomes.append(("refused", str(error)))
                continue
            outcomes.append((result.events, [p.to_json() for p in result.problems], result.notes, result.summary,
                             result.liveness, _publication_evidence(result)))
        assert outcomes[0] == outcomes[1], index
        compared += outcomes[0][0] != "refused"
    assert compared > 60  # most damaged captures still hold messages to compare


# --- what convert reads of the columns -------------------------------------------------------------
def test_settings_coverage_and_wire_evidence_read_from_columns_as_from_events(reference):
    timeouts = []
    for directory in _real_captures(reference)[:6]:
        load = load_captures([directory / "capture.pcap"], members=_members_of(directory))
        columns, events = load.columns, list(load.columns)
        assert columns is not None
        inferred = infer_settings(columns)
        assert inferred == infer_settings(events)
        timeouts += [one for one in inferred if one.name == ELECTION_TIMEOUT]
        assert coverage(columns, load.cluster_members) == coverage(events, load.cluster_members)
        assert wire_evidence(columns) == wire_evidence(events)
        assert load.summary() == dataclasses.replace(load, _events=events, columns=None).summary()
    # The election timeout from the ballots on the wire (issue 12): f and h at 1 s, j at 500 ms.
    assert sorted(one.value_ns // 1_000_000 for one in timeouts) == [500, 1000, 1000]


def test_a_capture_without_a_steady_stretch_still_converts_the_same(tmp_path):
    """The first 40 packets of a sample: streams starting, SETUPs, nothing yet steady."""
    sample = ROOT / "samples" / "clean-start"
    data = (sample / "host0.pcap").read_bytes()
    reader = PcapReader(data)
    cut = next(p.file_offset for p in reader.packets() if p.index == 41)
    path = tmp_path / "start.pcap"
    path.write_bytes(data[:cut])
    members = json.loads((sample / "summary.json").read_text())["clusterMembers"]
    _same_import([path], members)
    _same_conversion([path], members)


# --- made-up traffic: every kind of trouble, in any order -------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from formats import cluster_codecs as cc  # noqa: E402
from formats.pcap import PcapWriter  # noqa: E402
from formats.udp import (  # noqa: E402
    SM_SEND_SETUP_FLAG,
    SetupFrame,
    StatusMessage,
    encode_datagram,
    encode_frame,
    fragment_message,
    heartbeat,
)

LOOPBACK = MemberMap.parse(
    "0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
    "1,127.0.0.1:20102,127.0.0.1:20103,127.0.0.1:20104,127.0.0.1:20105,127.0.0.1:20101|"
    "2,127.0.0.1:20202,127.0.0.1:20203,127.0.0.1:20204,127.0.0.1:20205,127.0.0.1:20201"
)


@dataclasses.dataclass
class _Publication:
    src: int  # port on 127.0.0.1
    dst: int
    session: int
    stream: int
    term: int = 5
    offset: int = 0

    def frames(self, message: bytes, mtu: int) -> list[bytes]:
        frames = fragment_message(message, session_id=self.session, stream_id=self.stream, term_id=self.term,
                                  term_offset=self.offset, mtu=mtu)
        self.offset = frames[-1].term_offset + ((frames[-1].frame_length + 31) & -32)
        return [encode_datagram([frame]) for frame in frames]

    def setup(self) -> bytes:
        return encode_frame(SetupFrame(term_offset=self.offset, session_id=self.session, stream_id=self.stream,
                                       initial_term_id=5, active_term_id=self.term, term_length=65536, mtu=1408))

    def heartbeat(self, end: bool) -> bytes:
        return encode_frame(heartbeat(session_id=self.session, stream_id=self.stream, term_id=self.term,
                                      term_offset=self.offset, end_of_stream=end))

    def status(self, flags: int) -> bytes:
        return encode_frame(StatusMessage(session_id=self.session, stream_id=self.stream, consumption_term_id=self.term,
                                          consumption_term_offset=self.offset, receiver_window=65536, receiver_id=1,
                                          flags=flags))


def _publications() -> list[_Publication]:
    """Consensus between the three members (two with consecutive session ids), the leader's log to both
    followers (one publication, two destinations), a client's ingress and the leader's egress."""
    consensus = [_Publication(41000 + 10 * m + r, 20003 + 100 * r, 700 + 10 * m + r, 108)
                 for m in range(3) for r in range(3) if m != r]
    log = [_Publication(42000, 20004 + 100 * r, -55, 100) for r in (0, 2)]
    return consensus + log + [_Publication(43000, 20102, 900, 101), _Publication(43001, 20900, 901, 102)]


def _message(publication: _Publication, choice: int) -> bytes:
    sender = (publication.src - 41000) // 10 if publication.stream == 108 else 1
    if publication.stream == 108:
        return [cc.CanvassPosition(log_leadership_term_id=-1, log_position=choice, leadership_term_id=-1,
                                   follower_member_id=sender, protocol_version=65536),
                cc.AppendPosition(leadership_term_id=0, log_position=64 * choice, follower_member_id=sender),
                cc.CommitPosition(leadership_term_id=0, log_position=64 * choice, leader_member_id=sender),
                cc.NewLeadershipTerm(log_leadership_term_id=-1, next_leadership_term_id=0,
                                     next_term_base_log_position=0, next_log_position=-1, leadership_term_id=0,
                                     term_base_log_position=0, log_position=0, leader_recording_id=-1, timestamp=5,
                                     leader_member_id=sender, log_session_id=-55, app_version=1,
                                     is_startup=cc.BooleanType.FALSE),
                cc.CanvassPosition(log_leadership_term_id=-1, log_position=choice, leadership_term_id=-1,
                                   follower_member_id=(sender + 1) % 3, protocol_version=65536),  # names another
                ][choice % 5].encode()
    if publication.stream == 100:
        header = cc.SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=choice).encode()
        return header + bytes(choice % 3 * 700)  # now and then a message of several fragments
    if publication.stream == 101:
        return cc.SessionKeepAlive(leadership_term_id=0, cluster_session_id=choice).encode()
    return cc.NewLeaderEvent(leadership_term_id=0, cluster_session_id=choice, leader_member_id=1).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_made_up_traffic_with_loss_reordering_duplicates_restarts_and_silences_decodes_the_same_both_ways(data):
    publications = _publications()
    datagrams: list[tuple[int, int, int, bytes]] = []  # (ts, src port, dst port, payload)
    ts = 1_700_000_000_000_000_000
    for publication in publications:
        if data.draw(st.booleans()):
            datagrams.append((ts, publication.src, publication.dst, publication.setup()))
    held: dict[int, bytes] = {}
    for _ in range(data.draw(st.integers(20, 150))):
        which = data.draw(st.integers(0, len(publications) - 1))
        publication = publications[which]
        op = data.draw(st.sampled_from(["send"] * 6 + ["heartbeat"] * 3 + ["status"] * 2 + [
            "send setup status", "setup", "duplicate", "drop", "hold", "silence", "end", "unreachable",
            "new session"]))
        ts += data.draw(st.sampled_from([0, 1_000, 2_000_000, 30_000_000]))
        here = (publication.src, publication.dst)
        if op == "send":
            for payload in publication.frames(_message(publication, data.draw(st.integers(0, 9))), mtu=1408):
                datagrams.append((ts, *here, payload))
            if which in held:
                datagrams.append((ts, *here, held.pop(which)))  # a held-back frame, late
        elif op == "heartbeat":
            datagrams.append((ts, *here, publication.heartbeat(False)))
        elif op == "end":
            datagrams.append((ts, *here, publication.heartbeat(True)))
        elif op in ("status", "send setup status"):
            flags = SM_SEND_SETUP_FLAG if op == "send setup status" else 0
            datagrams.append((ts, publication.dst, publication.src, publication.status(flags)))
        elif op == "setup":
            datagrams.append((ts, *here, publication.setup()))
        elif op == "duplicate" and datagrams:  # an earlier datagram again (a retransmission, a second path)
            datagrams.append((ts, *datagrams[data.draw(st.integers(0, len(datagrams) - 1))][1:]))
        elif op == "drop":
            publication.frames(_message(publication, 1), mtu=1408)  # sent, never captured
        elif op == "hold":
            frames = publication.frames(_message(publication, 2), mtu=1408)
            held[which] = frames[0]
            datagrams.extend((ts, *here, payload) for payload in frames[1:])
        elif op == "silence":
            ts += 1_200_000_000
        elif op == "unreachable":  # nothing listened where the publication sends: an ICMP answer
            datagrams.append((ts, *here, None))
        elif op == "new session":  # the sender's new process: a new publication, from the start of a term
            publication.session += 37
            publication.offset = 0
    writer = PcapWriter()
    capture = writer.file_header() + b"".join(
        writer.udp_packet(when, "127.0.0.1", src, "127.0.0.1", dst, payload) if payload is not None
        else _icmp_port_unreachable(when, src, dst) for when, src, dst, payload in datagrams)
    outcomes = []
    for fast in (True, False):
        try:
            result = decode_captures([("made-up.pcap", capture)], LOOPBACK, bulk=fast)
        except DecodeError as error:
            outcomes.append(str(error))
            continue
        outcomes.append((result.events, [p.to_json() for p in result.problems], result.notes, result.summary,
                         result.liveness, _publication_evidence(result)))
    assert outcomes[0] == outcomes[1]
    if isinstance(outcomes[0], str):
        return
    # What recorder.capture makes of it (lives from the wire, what was sent to a member while it was
    # down, starts), on the bulk path's columns and on the reference's events.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "made-up.pcap"
        path.write_bytes(capture)
        _same_load([path], LOOPBACK.text)


def _icmp_port_unreachable(ts_ns: int, src_port: int, dst_port: int) -> bytes:
    """A pcap record (Ethernet, as `PcapWriter` writes them) of an ICMP port unreachable quoting a UDP
    datagram 127.0.0.1:src_port → 127.0.0.1:dst_port."""
    loopback = socket.inet_aton("127.0.0.1")
    quoted = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 36, 1, 0, 64, 17, 0, loopback, loopback)
    quoted += struct.pack("!HHHH", src_port, dst_port, 16, 0)
    icmp = struct.pack("!BBHI", 3, 3, 0, 0) + quoted
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 2, 0, 64, 1, 0, loopback, loopback) + icmp
    packet = bytes(12) + struct.pack("!H", 0x0800) + ip
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    return struct.pack("<IIII", seconds, nanos, len(packet), len(packet)) + packet


_BALLOT_EVENTS = st.sampled_from([  # what begins and ends a ballot more often than what resets it
    *[("out", "consensus", "RequestVote", {}), ("out", "consensus", "Vote", {"vote": "TRUE"}),
      ("out", "consensus", "CanvassPosition", {})] * 3,
    ("out", "consensus", "Vote", {"vote": True}), ("out", "consensus", "Vote", {"vote": "FALSE"}),
    ("local", "local", "MemberStart", {}), ("in", "consensus", "NewLeadershipTerm", {}),
    ("out", "consensus", "AppendPosition", {}), ("out", "consensus", "CommitPosition", {}),
    ("out", "consensus", "NewLeadershipTerm", {}), ("in", "consensus", "CanvassPosition", {}),
    ("out", "log", "NewLeadershipTermEvent", {}), ("in", "consensus", "Vote", {"vote": "TRUE"}),
])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2_000_000_000), _BALLOT_EVENTS), min_size=8, max_size=60))
def test_ballots_on_the_wire_are_found_the_same_in_columns_as_in_events(script):
    """The election timeout's wire samples (from a RequestVote or granted Vote to the member's next
    CanvassPosition, unless it led, followed or restarted in between), on made-up sequences: the
    columns' array version (`_ballots_of_rows`) finds the samples the loop over events finds, equal
    times and interleaved members included; and `infer_settings` of the columns (its own masks) infers
    what it infers from the events."""
    events = [Event(ts=ts, node=node, dir=direction, peer=None if direction == "local" else (node + 1) % 4,
                    channel=channel, type=kind, fields=fields)
              for node, ts, (direction, channel, kind, fields) in sorted(script, key=lambda item: item[1])]
    samples = _ballots_on_the_wire(events)
    columns = EventColumns.from_events(events)
    node, ts = columns.node, columns.ts
    kinds = np.array([columns.entries.types[e] for e in columns.entry.tolist()], dtype=object)
    granted = np.array([columns.entries.fields[e].get("vote") in ("TRUE", True) for e in columns.entry.tolist()], bool)
    direction = np.array([e.dir for e in events], dtype=object)
    consensus = np.array([e.channel == "consensus" for e in events], bool)
    out = (direction == "out") & consensus
    found = _ballots_of_rows(
        node, ts, begins=out & ((kinds == "RequestVote") | ((kinds == "Vote") & granted)),
        ends=out & (kinds == "CanvassPosition"),
        resets=(((direction == "local") & (kinds == "MemberStart")) | ((direction == "in") & (kinds == "NewLeadershipTerm"))
                | (out & np.isin(kinds, ["NewLeadershipTerm", "AppendPosition", "CommitPosition"]))))
    assert sorted(found) == sorted(samples)
    assert infer_settings(columns) == infer_settings(events)


# --- what the walk takes in bulk ---------------------------------------------------------------------
def _capture_of(datagrams: list[tuple[int, int, int, bytes]]) -> bytes:
    """A pcap of (ts, src port, dst port, payload) datagrams on 127.0.0.1."""
    writer = PcapWriter()
    return writer.file_header() + b"".join(writer.udp_packet(when, "127.0.0.1", src, "127.0.0.1", dst, payload)
                                           for when, src, dst, payload in datagrams)


def _fed_one_by_one(monkeypatch, capture: bytes) -> list[int]:
    """The packet numbers the bulk decoding of ``capture`` fed to the decoder one datagram at a time; the
    capture decoded both ways, the same."""
    fed: list[int] = []
    feed = bulk._Capture._feed

    def counted(self, packet):
        fed.append(packet.index)
        feed(self, packet)

    monkeypatch.setattr(bulk._Capture, "_feed", counted)
    outcomes = []
    for fast in (True, False):
        result = decode_captures([("made-up.pcap", capture)], LOOPBACK, bulk=fast)
        outcomes.append((result.events, [p.to_json() for p in result.problems], result.notes, result.summary,
                         result.liveness, _publication_evidence(result)))
    assert outcomes[0] == outcomes[1]
    return fed


def test_the_messages_that_make_a_publications_sender_known_are_taken_in_bulk(monkeypatch):
    """A consensus publication's first message names its sender, an egress publication's first
    NewLeaderEvent names the leader, and a log publication's heartbeats come before the NewLeadershipTerm
    (on a consensus stream) that names its leader: the walk takes them in its runs, as the decoder takes
    them one by one (the same events, notes and evidence), feeding only the SETUPs and that
    NewLeadershipTerm (which has side effects on other streams)."""
    vote = _Publication(41001, 20103, 701, 108)  # member 0 → member 1's consensus endpoint
    term = _Publication(41010, 20003, 710, 108)  # member 1 → member 0: the NewLeadershipTerm
    log = _Publication(42000, 20004, -55, 100)  # leader 1's log to member 0
    egress = _Publication(43001, 20900, 901, 102)  # to a client
    datagrams: list[tuple[int, int, int, bytes]] = []
    ts = 1_700_000_000_000_000_000

    def add(publication: _Publication, payload: bytes, *, back: bool = False) -> None:
        nonlocal ts
        ts += 1_000_000
        here = (publication.dst, publication.src) if back else (publication.src, publication.dst)
        datagrams.append((ts, *here, payload))

    setups = []
    for publication in (vote, term, log, egress):
        setups.append(len(datagrams) + 1)
        add(publication, publication.setup())
        add(publication, publication.status(0), back=True)
    for choice in (0, 0, 0):  # CanvassPositions naming member 0
        add(vote, vote.frames(_message(vote, choice), mtu=1408)[0])
    for _ in range(3):
        add(log, log.heartbeat(False))
    named = len(datagrams) + 1
    add(term, term.frames(_message(term, 3), mtu=1408)[0])  # NewLeadershipTerm: leader 1, log session -55
    for choice in (0, 1):
        add(log, log.heartbeat(False))
        add(log, log.frames(_message(log, choice), mtu=1408)[0])
        add(egress, egress.frames(_message(egress, choice), mtu=1408)[0])  # NewLeaderEvent
        add(vote, vote.frames(_message(vote, 1), mtu=1408)[0])  # AppendPosition
        add(vote, vote.status(0), back=True)
        add(log, log.status(0), back=True)
    assert _fed_one_by_one(monkeypatch, _capture_of(datagrams)) == [*setups, named]


def test_a_silence_inside_a_run_splits_a_members_activity_in_bulk_as_one_by_one(monkeypatch):
    """Member 0's only traffic, a steady consensus stream, falls silent for 1.2 s: the walk's spans of its
    activity (from the silences between a run's datagrams) are the decoder's (from every send in packet
    order), two of them."""
    vote = _Publication(41001, 20103, 701, 108)
    ts = 1_700_000_000_000_000_000
    datagrams = [(ts, vote.src, vote.dst, vote.setup())]
    for step in range(40):
        ts += 1_200_000_000 if step == 20 else 50_000_000
        datagrams.append((ts, vote.src, vote.dst, vote.frames(_message(vote, 1), mtu=1408)[0]))
    capture = _capture_of(datagrams)
    assert _fed_one_by_one(monkeypatch, capture) == [1]
    assert len(decode_captures([("made-up.pcap", capture)], LOOPBACK).liveness[0].heard) == 2


def test_a_capture_whose_times_go_back_decodes_the_same_both_ways(monkeypatch):
    """Times that go back in the capture (clock steps, merged captures): a member's spans of activity are
    then read from every send in packet order, not from stretches in time order."""
    vote = _Publication(41001, 20103, 701, 108)
    ts = 1_700_000_000_000_000_000
    datagrams = [(ts, vote.src, vote.dst, vote.setup())]
    for step in range(40):
        ts += -3_000_000_000 if step == 20 else 50_000_000
        datagrams.append((ts, vote.src, vote.dst, vote.frames(_message(vote, 1), mtu=1408)[0]))
        if step % 5 == 0:
            datagrams.append((ts, vote.dst, vote.src, vote.status(0)))
    _fed_one_by_one(monkeypatch, _capture_of(datagrams))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_assembled_order_puts_the_moved_rows_and_extra_events_where_a_sort_of_them_all_would(data):
    """`recorder.capture._assembled_order` against ``np.lexsort`` over every kept row and extra event:
    rows sorted by time with some moved later (queued to a start, an end of stream answered), some not
    kept, extra events of every order group tied with rows and with each other at equal times."""
    from recorder.capture import _assembled_order

    count = data.draw(st.integers(0, 30))
    captured_ts = np.sort(np.array(data.draw(st.lists(st.integers(0, 9), min_size=count, max_size=count)),
                                   dtype=np.int64))
    if data.draw(st.booleans()) and count > 1:  # (times that are not in order: the sort itself)
        captured_ts = captured_ts[::-1].copy()
    ts = captured_ts.copy()
    for row in data.draw(st.lists(st.integers(0, max(count - 1, 0)), max_size=count)) if count else []:
        ts[row] = data.draw(st.integers(int(ts[row]), 12))
    kept = np.array(data.draw(st.lists(st.booleans(), min_size=count, max_size=count)), dtype=bool)
    extra = data.draw(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 3), st.integers(0, count + 2)),
                               max_size=8))
    when, group, position = (np.array([item[k] for item in extra], dtype=np.int64) for k in range(3))
    taken = np.flatnonzero(kept)
    index = np.concatenate([taken, count + np.arange(len(extra))])
    expected = index[np.lexsort((np.concatenate([taken, position]),
                                 np.concatenate([np.ones(len(taken), np.int64), group]),
                                 np.concatenate([ts[taken], when])))]
    assert _assembled_order(captured_ts, ts, kept, when, group, position).tolist() == expected.tolist()


def test_the_rows_of_each_type_are_found_from_one_look_up_of_each_rows_type(reference):
    """`recorder.capture._TypedRows.rows_of_type` (each row's type looked up once) gives what
    `EventColumns.rows_of_type` gives, for every type of a real capture's rows, several types at once and
    a type it does not hold."""
    from recorder.capture import _TypedRows

    directory = reference / "aeron-1.47.3-capture" / "f_follower_kill_rejoin_catchup"
    rows = load_captures([directory / "capture.pcap"], members=_members_of(directory)).columns
    typed = _TypedRows(rows)
    names = sorted(set(rows.entries.types))
    assert len(names) > 10
    for name in names:
        assert typed.rows_of_type(name).tolist() == rows.rows_of_type(name).tolist()
    for several in (names[::3], ("CommitPosition", "AppendPosition", "CommitPosition"), ("NoSuchMessage",), ()):
        assert typed.rows_of_type(*several).tolist() == rows.rows_of_type(*several).tolist()
    assert typed.ts is rows.ts
