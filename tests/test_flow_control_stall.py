"""A consensus publication's sender held by its receiver's flow control (`recorder.capture.flow_control`).

Aeron's sender sends only up to its receiver's limit (the status messages' consumption position plus
window); a receiver whose consensus module no longer polls keeps that limit still.  What the sender's
consensus module offers meanwhile waits in the publication (offers past the term window beyond the
sender position are refused, BACK_PRESSURED) and leaves in one burst when the window opens.
h_five_members_leader_kill showed it: leader 0's CommitPositions to member 3, blocked for ever in
FOLLOWER_LOG_AWAIT, stopped on the wire at 19:25:11.90 and left together at 19:25:39.93, when member
3's new process answered.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.model.sim_parts import CONSENSUS_TERM_WINDOW, SimPublication, framed_length
from engine.replay import replay
from formats.udp import SetupFrame, StatusMessage, data_frame, encode_datagram, heartbeat
from recorder.capture.flow_control import FlowControlScanner, _dense_numbers
from recorder.capture.members import MemberMap
from tests.test_real_incident_behaviours import _replayed

MEMBERS = MemberMap.parse("0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
                          "1,127.0.0.1:20102,127.0.0.1:20103,127.0.0.1:20104,127.0.0.1:20105,127.0.0.1:20101")
SENDER = ("127.0.0.1", 40000)  # member 0's publication to member 1's consensus endpoint
RECEIVER = ("127.0.0.1", 20103)
SESSION, STREAM, TERM = 77, 108, 1000


def _data(offset: int, length: int = 32) -> bytes:
    return encode_datagram([data_frame(session_id=SESSION, stream_id=STREAM, term_id=TERM, term_offset=offset,
                                       payload=b"x" * (length - 32))])


def _status(offset: int, window: int, flags: int = 0) -> bytes:
    return encode_datagram([StatusMessage(session_id=SESSION, stream_id=STREAM, consumption_term_id=TERM,
                                          consumption_term_offset=offset, receiver_window=window, receiver_id=5,
                                          flags=flags)])


def _scan(datagrams: list[tuple[int, str, bytes]]) -> dict:
    scanner = FlowControlScanner(MEMBERS, STREAM)
    scanner.feed(0, SENDER, RECEIVER, encode_datagram([SetupFrame(
        term_offset=0, session_id=SESSION, stream_id=STREAM, initial_term_id=TERM, active_term_id=TERM,
        term_length=65536, mtu=1408)]))
    for ts, way, payload in datagrams:
        scanner.feed(ts, SENDER, RECEIVER, payload) if way == "data" else scanner.feed(ts, RECEIVER, SENDER, payload)
    return scanner.stalls()


def test_a_sender_that_reaches_its_receivers_window_is_stalled_until_it_sends_past_it():
    stalls = _scan([
        (1, "status", _status(0, 128)),
        (2, "data", _data(0, 64)),
        (3, "data", _data(64, 64)),  # ends at 128: the limit
        (4, "data", encode_datagram([heartbeat(session_id=SESSION, stream_id=STREAM, term_id=TERM, term_offset=128)])),
        (5, "status", _status(0, 128, flags=0x80)),  # a request for a SETUP moves nothing
        (6, "status", _status(64, 128)),  # the window opens to 192
        (7, "data", _data(128, 64)),  # and the sender goes on: the stall ends, and it is at the limit again
    ])
    assert stalls == {(1, SESSION): [(3, 7), (7, None)]}


def test_a_sender_below_its_receivers_window_is_never_stalled():
    stalls = _scan([(1, "status", _status(0, 32768)), (2, "data", _data(0, 64)), (3, "status", _status(64, 32768)),
                    (4, "data", _data(64, 96))])
    assert stalls == {}


def test_a_stalled_publication_takes_offers_up_to_the_term_window_past_where_its_sender_stopped():
    publication = SimPublication()
    publication.on_status(True, None)
    assert publication.offer(32)
    stopped = publication.position
    publication.on_status(True, None, sender_stalled=True)
    taken = 0
    while publication.offer(32):
        taken += 1
    assert taken == CONSENSUS_TERM_WINDOW // framed_length(32)  # then BACK_PRESSURED
    # Losing and regaining the receiver keeps the stall where it began; only its end lifts it.
    publication.on_status(False, None, sender_stalled=True)
    publication.on_status(True, None, sender_stalled=True)
    assert publication.limit == stopped + CONSENSUS_TERM_WINDOW and not publication.offer(32)
    publication.on_status(True, None)
    assert publication.offer(32)


def _at(text: str) -> int:
    """ns since the epoch of a time of day on the capture's day (UTC), to the microsecond."""
    whole, _, fraction = text.partition(".")
    second = datetime.fromisoformat(f"2026-11-23T{whole}+00:00").astimezone(UTC).timestamp()
    return int(second) * 10**9 + int(fraction.ljust(9, "0"))


def test_a_leaders_offers_to_a_member_that_stopped_polling_wait_in_the_publication_until_its_window_opens():
    """h_five_members_leader_kill: leader 0's sender reached member 3's window at 19:25:11.904476 and next
    sent at 19:25:39.930124 (member 3's new process answered): the CommitPositions offered between left then,
    together, and none of the model's sends to member 3 is a divergence."""
    events, records = _replayed("h_five_members_leader_kill")
    statuses = [(e.ts, e.fields["connected"], e.fields["senderStalled"]) for e in events
                if e.type == "PublicationStatus" and e.node == 0 and e.peer == 3]
    stalled = [s for s in statuses if s[2]]
    assert stalled[0] == (_at("19:25:11.904476"), True, True)  # then member 3 is killed: not connected, still stalled
    assert statuses[-1] == (_at("19:25:39.930124"), True, False)
    offered = [r for r in records if r["kind"] == "send" and r["node"] == 0 and r.get("peer") == 3
               and r["type"] == "CommitPosition" and _at("19:25:26") < r["ts"] < _at("19:25:34")]
    assert len({r["fields"]["logPosition"] for r in offered}) > 50  # 4448 ... 10720: offered, sent at 19:25:39.93
    assert not [r for r in records if r["kind"] == "divergence" and r["node"] == 0]
    # Without the stall, the same offers are held to the wire at their own times: they were not there.
    unstalled = [replace(e, fields={k: v for k, v in e.fields.items() if k != "senderStalled"})
                 if e.type == "PublicationStatus" else e for e in events]
    diverged = [r for r in replay(unstalled) if r["kind"] == "divergence" and r["node"] == 0]
    assert diverged and all(r["expected"]["type"] == "CommitPosition" for r in diverged)


@given(st.lists(st.integers(min_value=0, max_value=(1 << 23)), max_size=300), st.booleans())
def test_dense_numbers_are_the_ranks_np_unique_gives_whether_counted_in_a_table_or_sorted(values, small):
    array = np.array([v % (1 << 20) if small else v for v in values], dtype=np.int64)
    expected = np.unique(array, return_inverse=True)[1].reshape(-1)
    got = _dense_numbers(array)
    assert got.dtype == np.int64
    assert np.array_equal(got, expected)


# --- the scan over a whole table (`feed_columns`) against one datagram at a time (`feed`) ----------------
def _table(datagrams: list[tuple[int, tuple[str, int], tuple[str, int], bytes]]):
    from formats.pcap import PcapReader, PcapWriter
    writer = PcapWriter()
    records = [writer.file_header()]
    records += [writer.udp_packet(ts, *src, *dst, payload) for ts, src, dst, payload in datagrams]
    return PcapReader(b"".join(records)).columns()


def _both_ways(datagrams: list[tuple[int, tuple[str, int], tuple[str, int], bytes]]) -> tuple[dict, dict]:
    one_by_one = FlowControlScanner(MEMBERS, STREAM)
    for ts, src, dst, payload in datagrams:
        one_by_one.feed(ts, src, dst, payload)
    columns = FlowControlScanner(MEMBERS, STREAM)
    columns.feed_columns(_table(datagrams))
    return columns.stalls(), one_by_one.stalls()


def _frames(session: int, *, sender: tuple[str, int], receiver: tuple[str, int], window: int, ends: list[int],
            term: int = TERM, at: int = 0) -> list[tuple[int, tuple[str, int], tuple[str, int], bytes]]:
    """A publication's SETUP, a status message giving ``window``, and data frames of 64 bytes ending at
    ``ends`` (from ``term``'s offset 0 on; past the term length, in the next terms)."""
    out = [(at, sender, receiver, encode_datagram([SetupFrame(
        term_offset=0, session_id=session, stream_id=STREAM, initial_term_id=term, active_term_id=term,
        term_length=65536, mtu=1408)])),
        (at + 1, receiver, sender, encode_datagram([StatusMessage(
            session_id=session, stream_id=STREAM, consumption_term_id=term, consumption_term_offset=0,
            receiver_window=window, receiver_id=5)]))]
    for k, end in enumerate(ends):
        terms, offset = divmod(end - 64, 65536)
        out.append((at + 2 + k, sender, receiver, encode_datagram([data_frame(
            session_id=session, stream_id=STREAM, term_id=term + terms, term_offset=offset, payload=b"x" * 32)])))
    return out


def test_publications_whose_session_ids_share_their_low_bits_are_told_apart_by_the_table_scan():
    """The table scan first keeps the publications by the low 16 bits of their session ids, a bucket of
    several at once: here one that reaches its window shares its bucket with two that do not (one in
    another direction), and one more reaches its window alone; the stalls are those `feed` finds."""
    other = ("127.0.0.1", 40001)
    datagrams = sorted(
        _frames(SESSION, sender=SENDER, receiver=RECEIVER, window=128, ends=[64, 128], at=10)
        + _frames(SESSION + (1 << 16), sender=SENDER, receiver=RECEIVER, window=4096, ends=[64, 128], at=20)
        + _frames(SESSION + (2 << 16), sender=RECEIVER, receiver=("127.0.0.1", 20003), window=4096, ends=[64], at=30)
        + _frames(SESSION + 1, sender=other, receiver=RECEIVER, window=4096, ends=[64, 65536 + 64], at=40),
        key=lambda d: d[0])
    columns, one_by_one = _both_ways(datagrams)
    assert columns == one_by_one
    assert set(columns) == {(1, SESSION), (1, SESSION + 1)}


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([64, 128, 256, 4096]),
                          st.lists(st.integers(1, 100), min_size=0, max_size=6), st.booleans()),
                min_size=1, max_size=6))
def test_the_table_scan_finds_the_stalls_feed_finds_whatever_the_sessions(publications):
    """Made-up publications, their session ids in few buckets (the same low bits), some with data in a
    second term after some in the first: `feed_columns` and `feed` find the same stalls.  (A publication
    first seen in a later term than its SETUP's, with data below its window there, is not read one by
    one, by `feed` it can be stalled: the table scan assumes data from the first term on, as before.)"""
    datagrams = []
    for k, (bucket_mate, window, steps, second_term) in enumerate(publications):
        ends = list(np.cumsum([64 * s for s in steps]).tolist()) if steps else []
        if second_term and len(ends) > 1:
            ends[-1] += 65536
        datagrams += _frames(SESSION + (bucket_mate << 16) + (k % 2), sender=("127.0.0.1", 40000 + k),
                             receiver=RECEIVER, window=window, ends=ends, at=k * 100)
    columns, one_by_one = _both_ways(sorted(datagrams, key=lambda d: d[0]))
    assert columns == one_by_one


@given(st.lists(st.tuples(st.integers(-2, 70_000), st.integers(0, 65_535)), max_size=50),
       st.lists(st.integers(-1, 70_000), max_size=5))
def test_the_rows_on_some_ports_are_those_np_isin_finds_whether_by_a_table_or_not(rows, ports):
    """`on_ports` looks the ports up in a table of the 65536 when the columns hold ports only (as a
    capture's do), else (here a made-up table's values out of range) with ``np.isin``: the same rows."""
    from types import SimpleNamespace

    from recorder.capture.flow_control import on_ports
    src = np.array([r[0] for r in rows], dtype=np.int32)
    dst = np.array([r[1] for r in rows], dtype=np.int32)
    for table in (SimpleNamespace(src_port=src, dst_port=dst), SimpleNamespace(src_port=dst, dst_port=dst)):
        wanted = np.array(ports, dtype=np.int64)
        expected = np.isin(table.src_port, wanted) | np.isin(table.dst_port, wanted)
        assert np.array_equal(on_ports(table, ports), expected)
