"""Helpers for the Spark tests and benchmark: one shared local Spark session, and synthetic captures.

`shared_spark()` starts (once per process) the session every Spark test uses: `local[2,2]` (two
cores; a task is tried twice, as the fault test needs: plain `local[2]` never retries), no UI, two
shuffle partitions, no package downloads (everything Spark needs ships in the pyspark wheel), so
the tests run offline.  It is built by `recorder.spark.job.spark_session`, the same builder the
``--engine spark`` path uses.

`cluster_capture(seed, ...)` builds a classic pcap of a 3-member Aeron Cluster on three hosts: a
startup election (canvass, vote, new leadership term) followed by a steady state of log messages from
the leader and AppendPosition/CommitPosition heartbeats, framed as Aeron frames them (SETUP first,
fragmentation at the MTU, PAD at a term's end and the next term).  Equal arguments give equal bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from formats import cluster_codecs as cc
from formats.pcap import PcapWriter
from formats.udp import PadFrame, SetupFrame, encode_datagram, fragment_message

HOSTS = ("10.0.0.1", "10.0.0.2", "10.0.0.3")
CONSENSUS_PORT, LOG_PORT = 9003, 9004
MEMBERS = "|".join(
    f"{i},{host}:9002,{host}:{CONSENSUS_PORT},{host}:{LOG_PORT},{host}:9005,{host}:9001" for i, host in enumerate(HOSTS)
)
LEADER = 1
PROTOCOL_VERSION = 65536

_session = None


def shared_spark():
    """The one Spark session of this test process (created on first use)."""
    global _session
    if _session is None:
        from recorder.spark.job import spark_session

        _session = spark_session("local[2,2]", {"spark.sql.shuffle.partitions": "2",
                                              "spark.default.parallelism": "2"})
    return _session


@dataclass
class _Publication:
    src: tuple[str, int]
    session_id: int
    stream_id: int
    term_length: int
    initial_term_id: int
    mtu: int = 1408
    term_id: int = 0
    term_offset: int = 0

    def __post_init__(self) -> None:
        self.term_id = self.initial_term_id

    def setup(self) -> bytes:
        return encode_datagram([SetupFrame(term_offset=self.term_offset, session_id=self.session_id,
                                           stream_id=self.stream_id, initial_term_id=self.initial_term_id,
                                           active_term_id=self.term_id, term_length=self.term_length,
                                           mtu=self.mtu)])

    def send(self, message: bytes) -> list[bytes]:
        """The datagrams carrying ``message``: a PAD and a new term first when it does not fit."""
        out = []
        frames = fragment_message(message, session_id=self.session_id, stream_id=self.stream_id,
                                  term_id=self.term_id, term_offset=self.term_offset, mtu=self.mtu)
        end = frames[-1].term_offset + ((frames[-1].frame_length + 31) & -32)
        if end > self.term_length:
            if self.term_offset < self.term_length:  # a term filled exactly needs no padding
                out.append(encode_datagram([PadFrame(
                    frame_length=self.term_length - self.term_offset, flags=0xC0, term_offset=self.term_offset,
                    session_id=self.session_id, stream_id=self.stream_id, term_id=self.term_id)]))
            self.term_id += 1
            self.term_offset = 0
            frames = fragment_message(message, session_id=self.session_id, stream_id=self.stream_id,
                                      term_id=self.term_id, term_offset=0, mtu=self.mtu)
            end = frames[-1].term_offset + ((frames[-1].frame_length + 31) & -32)
        self.term_offset = end
        out += [encode_datagram([frame]) for frame in frames]
        return out

    @property
    def position(self) -> int:
        shift = self.term_length.bit_length() - 1
        return ((self.term_id - self.initial_term_id) << shift) + self.term_offset


class _Capture:
    def __init__(self, seed: int, start_ns: int) -> None:
        self.rng = random.Random(seed)
        self.writer = PcapWriter()
        self.parts = [self.writer.file_header()]
        self.ts = start_ns

    def put(self, src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> None:
        self.ts += self.rng.randrange(1_000, 50_000)
        self.parts.append(self.writer.udp_packet(self.ts, src[0], src[1], dst[0], dst[1], payload))


def cluster_capture(
    seed: int = 0,
    *,
    heartbeats: int = 20,
    log_bytes: tuple[int, int] = (16, 3000),
    start_ns: int = 1_700_000_000_000_000_000,
    log_term_length: int = 65536,
) -> bytes:
    """A classic pcap of a 3-member cluster electing member 1 and then serving ``heartbeats`` rounds."""
    capture = _Capture(seed, start_ns)
    rng = capture.rng
    consensus = {}
    for i in range(3):
        for j in range(3):
            if i != j:
                consensus[i, j] = _Publication((HOSTS[i], 40000 + 10 * i + j), rng.randrange(1, 1 << 31), 108,
                                               65536, rng.randrange(-1000, 1000))
                capture.put(consensus[i, j].src, (HOSTS[j], CONSENSUS_PORT), consensus[i, j].setup())

    def consensus_send(i: int, j: int, message: bytes) -> None:
        for datagram in consensus[i, j].send(message):
            capture.put(consensus[i, j].src, (HOSTS[j], CONSENSUS_PORT), datagram)

    followers = [i for i in range(3) if i != LEADER]
    for i in range(3):
        for j in range(3):
            if i != j:
                consensus_send(i, j, cc.CanvassPosition(log_leadership_term_id=-1, log_position=0,
                                                        leadership_term_id=-1, follower_member_id=i,
                                                        protocol_version=PROTOCOL_VERSION).encode())
    for j in followers:
        consensus_send(LEADER, j, cc.RequestVote(log_leadership_term_id=-1, log_position=0, candidate_term_id=0,
                                                 candidate_member_id=LEADER,
                                                 protocol_version=PROTOCOL_VERSION).encode())
    for i in followers:
        consensus_send(i, LEADER, cc.Vote(candidate_term_id=0, log_leadership_term_id=-1, log_position=0,
                                          candidate_member_id=LEADER, follower_member_id=i,
                                          vote=cc.BooleanType.TRUE).encode())
    log = _Publication((HOSTS[LEADER], 41000), rng.randrange(1, 1 << 31), 100, log_term_length,
                       rng.randrange(-1000, 1000))
    for j in followers:
        consensus_send(LEADER, j, cc.NewLeadershipTerm(
            log_leadership_term_id=-1, next_leadership_term_id=0, next_term_base_log_position=0,
            next_log_position=0, leadership_term_id=0, term_base_log_position=0, log_position=0,
            leader_recording_id=0, timestamp=start_ns // 1_000_000, leader_member_id=LEADER,
            log_session_id=log.session_id, app_version=1, is_startup=cc.BooleanType.TRUE).encode())
    for j in followers:
        capture.put(log.src, (HOSTS[j], LOG_PORT), log.setup())

    def log_send(message: bytes) -> None:
        for datagram in log.send(message):
            for j in followers:
                capture.put(log.src, (HOSTS[j], LOG_PORT), datagram)

    log_send(cc.NewLeadershipTermEvent(leadership_term_id=0, log_position=0, timestamp=start_ns // 1_000_000,
                                       term_base_log_position=0, leader_member_id=LEADER,
                                       log_session_id=log.session_id, time_unit=cc.ClusterTimeUnit.MILLIS,
                                       app_version=1).encode())
    for round_ in range(heartbeats):
        for _ in range(rng.randrange(1, 4)):
            body = rng.randbytes(rng.randrange(*log_bytes))
            log_send(cc.SessionMessageHeader(leadership_term_id=0, cluster_session_id=round_ % 7,
                                             timestamp=capture.ts // 1_000_000).encode() + body)
        for i in followers:
            consensus_send(i, LEADER, cc.AppendPosition(leadership_term_id=0, log_position=log.position,
                                                        follower_member_id=i, flags=0).encode())
        for j in followers:
            consensus_send(LEADER, j, cc.CommitPosition(leadership_term_id=0, log_position=log.position,
                                                        leader_member_id=LEADER).encode())
    return b"".join(capture.parts)
