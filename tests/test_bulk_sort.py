"""The bulk decoder's sorting of a capture's datagrams (`recorder.capture.bulk`) by array operations
gives what the plain operations it stands for give.

Its streams are numbered as ``np.unique`` numbers their hashes (`_numbered`, a table of the hashes'
top bits rather than a sort); the events' sort keys are packed part by part (`_sort_order`, the
lexicographic order of the joined keys); the first 24 bytes of each payload and each whole message's
bytes are copied as windows of the file, a stretch at a time (`_Capture._read_heads`, `_cells`), and
what the first frame is read from them (`_frame_kinds`) as `DatagramDecoder` reads it.  Every real
capture's conversion is compared with the reference path in tests/test_bulk_convert.py; these tests
go to the edges (hash collisions, the file's last bytes, keys too wide to pack).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.pcap import PcapReader, PcapWriter
from recorder.capture import bulk

UINT64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(UINT64, min_size=1, max_size=12), st.integers(min_value=0, max_value=5000), st.randoms())
def test_hashes_are_numbered_as_np_unique_numbers_them(pool, count, rng):
    values = np.array([rng.choice(pool) for _ in range(count)], dtype=np.uint64)
    distinct, inverse = bulk._numbered(values)
    expected, expected_inverse = np.unique(values, return_inverse=True)
    assert np.array_equal(distinct, expected)
    assert np.array_equal(inverse, expected_inverse.reshape(-1)) and inverse.dtype == np.int64


def test_hashes_sharing_their_top_bits_are_told_apart():
    """Values that fall on one slot of the table (their top bits alike) are numbered by search."""
    rng = np.random.default_rng(5)
    for count, distinct in ((3000, 40), (200_000, 2500), (50_000, 50_000)):
        low = rng.integers(0, 1 << 20, distinct).astype(np.uint64)
        top = rng.integers(0, 4, distinct).astype(np.uint64) << np.uint64(60)
        values = (top | low)[rng.integers(0, distinct, count)]
        got, inverse = bulk._numbered(values)
        expected, expected_inverse = np.unique(values, return_inverse=True)
        assert np.array_equal(got, expected) and np.array_equal(inverse, expected_inverse.reshape(-1))


def test_streams_are_grouped_and_numbered_as_by_sorting_their_keys():
    """`_group`'s numbers are those of its hashes' sorted order: the same numbering as before the table
    (the walk's order of streams depends on it); equal tuples share a number, others do not."""
    rng = np.random.default_rng(7)
    streams = rng.integers(-(1 << 31), 1 << 31, (700, 6))
    rows = streams[rng.integers(0, len(streams), 150_000)].astype(np.int32)
    keys = [rows[:, k].copy() for k in range(6)]
    numbers = bulk._group(*keys)
    digest = np.zeros(len(rows), dtype=np.uint64)
    for k, key in enumerate(keys):
        digest = (digest ^ key.astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(2 * k + 1)
        digest ^= digest >> np.uint64(29)
    assert np.array_equal(numbers, np.unique(digest, return_inverse=True)[1].reshape(-1))
    tuples = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
    assert len(np.unique(numbers)) == len(np.unique(tuples))
    assert np.array_equal(np.unique(np.stack([numbers, tuples], axis=1), axis=0)[:, 0], np.arange(numbers.max() + 1))


KEY_PARTS = st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(KEY_PARTS, st.booleans(), st.randoms())
def test_events_are_ordered_as_their_joined_keys_sort(sizes, wide, rng):
    """Keys given part by part (small dtypes, as the runs' events keep them), packed when they fit,
    else sorted whole (a negative or very large key); ties keep the parts' order."""
    parts = []
    for size in sizes:
        ts = np.array([rng.randrange(5) for _ in range(size)], dtype=np.int64)
        capture = np.array([rng.randrange(2) for _ in range(size)], dtype=np.int32)
        packet = np.array([rng.randrange(-3 if wide else 0, (1 << 62) if wide and rng.random() < 0.3 else 9)
                           for _ in range(size)], dtype=np.int64)
        order = np.array([rng.randrange(3) for _ in range(size)], dtype=np.int8)
        direction = np.array([rng.randrange(2) for _ in range(size)], dtype=np.int8)
        parts.append([ts, capture, packet, order, direction])
    joined = [np.concatenate([part[k] for part in parts]).astype(np.int64) for k in range(5)]
    assert np.array_equal(bulk._sort_order(parts), np.lexsort(joined[::-1]))


def test_keys_written_in_place_are_the_joined_keys_as_int32():
    values = np.arange(-5, 20, dtype=np.int32) * 1_000_003
    wide = np.arange(10, dtype=np.int64) + (1 << 33)  # wraps, as ``astype`` wraps it
    rows = np.array([3, 0, 24, 7, 7])
    got = bulk._joined((values, rows), (values.astype(np.int64), rows[::-1]), wide, values[:4])
    expected = np.concatenate([values[rows], values.astype(np.int64)[rows[::-1]], wide, values[:4]]).astype(np.int32)
    assert got.dtype == np.int32 and np.array_equal(got, expected)


def test_a_messages_bytes_are_copied_up_to_the_files_last_byte():
    raw = np.frombuffer(bytes(range(256)) * 3, dtype=np.uint8)
    for length in (1, 5, 8, 13, 24):
        at = np.array([0, 17, len(raw) - 40, len(raw) - length])
        cells = bulk._cells(raw, at, length)
        width = -(-length // 8) * 8
        assert cells.shape == (len(at), width)
        for row, start in zip(cells, at.tolist(), strict=True):
            assert row.tobytes() == raw[start:start + length].tobytes() + bytes(width - length)


class _Entries:
    """`BulkDecoder` as `_Capture._entries` asks it: an entry number per distinct message."""

    def __init__(self) -> None:
        self._by_digest: dict = {}
        self._entry_fed: list[bool] = []
        self.numbers: dict[bytes, int] = {}

    def entry(self, payload: bytes) -> int:
        return self.numbers.setdefault(payload, len(self.numbers))


def _datagrams(count: int) -> bytes:
    """A pcap of DATA frames (whole messages, heartbeats, fragments, misaligned ones), status messages,
    NAKs, RTTMs and short or odd datagrams; the last one a few bytes long, at the very end of the file."""
    writer = PcapWriter()
    records = [writer.file_header()]
    for n in range(count):
        kind = n % 7
        message = bytes((n * 3 + k) % 7 for k in range(8 + n % 5 * 6))  # a few distinct messages of each length
        if kind in (0, 1, 2):  # DATA: a whole message (B|E), a fragment, a misaligned offset
            flags = 0xC0 if kind != 1 else 0x80
            offset = 64 * n if kind != 2 else 64 * n + 4
            length = 32 + len(message)
            payload = struct.pack("<iBBHiiiiq", length, 0, flags, 1, offset, 7, 100 + n % 3, 5, 0) + message
            payload += bytes(-len(payload) % 32)
        elif kind == 3:  # a heartbeat (end of stream on some)
            payload = struct.pack("<iBBHiiiiq", 0, 0, 0xE0 if n % 2 else 0xC0, 1, 64 * n, 7, 101, 5, 0)
        elif kind == 4:  # a status message (some asking for a SETUP)
            payload = struct.pack("<iBBHiiiiiq", 36, 0, 0x80 * (n % 2), 3, 7, 101, 5, 64 * n, 1 << 16, 9)[:36]
        elif kind == 5:  # a NAK, or an RTTM
            payload = (struct.pack("<iBBHiiiii", 28, 0, 0, 2, 7, 101, 5, 64, 32) if n % 2 else
                       struct.pack("<iBBHiiqqq", 40, 0, 0, 6, 7, 101, n, 0, 1))
        else:  # short, or not a frame at all
            payload = bytes(range(n % 30))
        records.append(writer.udp_packet(1_000_000_000 + n * 1000, "127.0.0.1", 40000 + n % 3, "127.0.0.1",
                                         20003, payload))
    records.append(writer.udp_packet(2_000_000_000, "127.0.0.1", 40000, "127.0.0.1", 20003, b"\x01\x02\x03\x04\x05\x06\x07\x08\x09"))
    return b"".join(records)


@pytest.mark.parametrize("held", [bulk.HELD_MESSAGE_BYTES, 300], ids=["grouped-once", "grouped-often"])
def test_heads_and_messages_read_a_stretch_at_a_time_are_the_files_bytes(monkeypatch, held):
    """Each payload's first 24 bytes (zeros past the file), what its first frame is, and each whole
    message's entry, read in many small stretches (the messages grouped at the end, or every few
    stretches): as read one datagram at a time."""
    monkeypatch.setattr(bulk, "STRETCH_BYTES", 700)
    monkeypatch.setattr(bulk, "HELD_MESSAGE_BYTES", held)
    data = _datagrams(400)
    table = PcapReader(data).columns()
    capture = bulk._Capture.__new__(bulk._Capture)
    capture.columns, capture.read, capture.bulk = table, None, _Entries()
    reads: list[tuple[int, int]] = []
    capture.read = lambda start, end: reads.append((start, end))
    has = np.flatnonzero((table.payload_offset >= 0) & (table.payload_length >= 8))
    at, size = table.payload_offset[has], table.payload_length[has]
    heads, counted, heartbeat, message, entry = capture._read_heads(at, size)
    assert len(reads) > 20
    raw = bytes(table.data)
    numbers = {}
    expected_entries = []
    for k, (start, length) in enumerate(zip(at.tolist(), size.tolist(), strict=True)):
        assert heads[k].tobytes() == (raw[start:start + 24] + bytes(24))[:24]
        frame_length, version, flags, frame_type, term_offset = struct.unpack_from("<iBBHi", raw[start:start + 24] + bytes(24))
        minimum = {2: 28, 3: 36, 6: 40}.get(frame_type, 1 << 31)
        is_counted = version == 0 and minimum <= frame_length <= length
        is_data = (not is_counted and frame_type == 1 and length >= 32 and version == 0 and term_offset >= 0
                   and term_offset % 32 == 0)
        is_heartbeat = is_data and frame_length == 0 and length == 32
        is_message = (is_data and 32 <= frame_length <= length <= (frame_length + 31) // 32 * 32
                      and flags & 0xC0 == 0xC0)
        assert (counted[k], heartbeat[k], message[k]) == (is_counted, is_heartbeat, is_message)
        if is_message:
            expected_entries.append(numbers.setdefault(raw[start + 32:start + frame_length], len(numbers)))
    assert message.any() and heartbeat.any() and counted.any()
    got = entry.tolist()
    payloads = {number: payload for payload, number in capture.bulk.numbers.items()}
    # (Numbered in another order: the same messages alike, different ones apart.)
    assert [payloads[e] for e in got] == [{v: p for p, v in numbers.items()}[e] for e in expected_entries]
