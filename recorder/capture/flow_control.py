"""When a consensus publication's sender was held by its receiver's flow control, from the wire.

Aeron's sender sends a publication's data only up to the limit its receiver's status messages set
(unicast flow control: the highest consumption position plus receiver window any status message
gave).  A receiver whose consensus module stops polling its subscription keeps answering, but its
consumption position no longer moves: the sender reaches the limit and sends nothing more (only
heartbeats at that position) until a status message raises it.  What the consensus module offered
meanwhile waits in the publication's term buffer (up to the term window past the sender position;
further offers are refused, BACK_PRESSURED) and leaves the sender in one burst when the window opens.
In h_five_members_leader_kill, leader 0's consensus publication to member 3 (blocked in
FOLLOWER_LOG_AWAIT, never polling again) reached member 3's limit (consumption 0 + window 32768) at
19:25:11.90; its CommitPositions of 19:25:11.9-19:25:34 left in one burst at 19:25:39.93, when
member 3's new process answered the publication.

`FlowControlScanner` reads the consensus stream's DATA, SETUP and SM frames (nothing else) and
`stalls` gives, per (receiver member, session id), the spans (from, until) in which the sender sat
at its flow-control limit: from the datagram that took the sender to the limit to the first one
that went past it (None: the capture ended first).  Positions are the wire's own, never compared
with the model's (its stream of sends differs by a few heartbeats); the spans' times are what
`recorder.capture.publications` turns into ``PublicationStatus`` evidence (``senderStalled``).

Pure: datagrams in, spans out.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from formats.pcap import PacketColumns
from recorder.capture.members import MemberMap

_HEADER = struct.Struct("<iBBH")
_DATA = struct.Struct("<iiii")  # term offset, session id, stream id, term id
_SM = struct.Struct("<iiiii")  # session id, stream id, consumption term id, consumption term offset, window
_SETUP = struct.Struct("<iiiiii")  # term offset, session id, stream id, initial term id, active term id, term length
_TYPE_DATA, _TYPE_SM, _TYPE_SETUP = 0x01, 0x03, 0x05
_SM_SETUP_FLAG = 0x80
FRAME_ALIGNMENT = 32
#: The consensus channel's term length when no SETUP shows it (Aeron Cluster's default, 64 KiB).
DEFAULT_TERM_LENGTH = 64 * 1024


#: `header_words` gathers the headers of about this many bytes of the file at a time.
STRETCH_BYTES = 1 << 22


def header_words(table: PacketColumns, rows: np.ndarray,
                 read: Callable[[int, int], None] | None = None) -> np.ndarray:
    """The first 32 bytes of each row's payload as eight little-endian int32 words (Aeron's frame
    header: word 0 the frame length, byte 5 the flags, bytes 6-7 the type, then the frame's own
    fields).  Rows must have their payload in the file (``payload_offset >= 0``); bytes past a short
    payload are whatever follows it in the file (read no field beyond a frame's length).  They are
    gathered a stretch of the file at a time, in row order; ``read(start, end)``, when given, hears of
    each stretch of bytes done (a caller with the file memory-mapped lets those pages go)."""
    raw = np.frombuffer(table.data, dtype=np.uint8)
    out = np.zeros(len(rows), dtype="V32")
    if not len(rows) or not len(raw):
        return out.view("<i4").reshape(-1, 8)
    at = table.payload_offset[rows].astype(np.int64)
    whole = at <= len(raw) - 32
    if len(raw) >= 32:
        # The file's 32-byte windows as one-dimensional items (one per byte offset, a view): a gather copies
        # each row's header as one item, much faster than a row of 32 bytes of a two-dimensional window view.
        windows = np.ndarray((len(raw) - 31,), dtype="V32", buffer=raw, strides=(1,))
        everywhere = bool(whole.all())
        inside = None if everywhere else np.flatnonzero(whole)
        places = at if everywhere else at[inside]
        # Stretches by position in the file (rows are in file order; where they are not, one gather).
        increasing = len(places) < 2 or bool((places[1:] >= places[:-1]).all())
        marks = (np.searchsorted(places, np.arange(int(places[0]), int(places[-1]) + STRETCH_BYTES,
                                                   STRETCH_BYTES)[1:], side="left").tolist()
                 if increasing and len(places) else [])
        start = 0
        for end in [*marks, len(places)]:
            if end <= start:
                continue
            if inside is None:
                out[start:end] = windows[places[start:end]]
            else:
                out[inside[start:end]] = windows[places[start:end]]
            if read is not None and increasing:
                read(int(places[start]), int(places[end - 1]))
            start = end
    bytes_out = out.view(np.uint8).reshape(-1, 32)
    for i in np.flatnonzero(~whole).tolist():  # a datagram in the file's last 32 bytes
        tail = raw[at[i]:]
        bytes_out[i, : len(tail)] = tail
    return out.view("<i4").reshape(-1, 8)


def endpoint_pair_keys(src: np.ndarray, src_port: np.ndarray, dst: np.ndarray, dst_port: np.ndarray,
                       session: np.ndarray) -> np.ndarray:
    """One int64 per (source endpoint, destination endpoint, session id): the endpoints numbered densely
    (an address's number and port), the session id's 32 bits below them."""
    ends = np.concatenate([src.astype(np.int64) << 16 | src_port.astype(np.int64),
                           dst.astype(np.int64) << 16 | dst_port.astype(np.int64)])
    dense = _dense_numbers(ends)
    count = int(dense.max()) + 1 if len(dense) else 1
    a, b = dense[: len(src)], dense[len(src):]
    return (a * count + b) << 32 | (session.astype(np.int64) & 0xFFFFFFFF)


#: `_dense_numbers` counts values below this in a table (a capture's endpoints: a handful of addresses,
#: 16 bits of port each) rather than sorting them.
_TABLE_LIMIT = 1 << 22


def _dense_numbers(values: np.ndarray) -> np.ndarray:
    """``np.unique(values, return_inverse=True)[1]`` of non-negative int64s: each value's rank among the
    distinct values; by a table of the values present where they are small (no sort of every value)."""
    if len(values) and 0 <= int(values.min()) and int(values.max()) < _TABLE_LIMIT:
        present = np.bincount(values) > 0
        ranks = np.cumsum(present) - 1
        return ranks[values].astype(np.int64)
    return np.unique(values, return_inverse=True)[1].reshape(-1).astype(np.int64)


def on_ports(table: PacketColumns, ports: list[int]) -> np.ndarray:
    """Whether each row's source or destination port is one of ``ports``: ``np.isin`` of both port
    columns, by a table of the 65536 ports where the columns are in range (as a capture's always are)."""
    found = np.zeros(1 << 16, dtype=bool)
    found[[port for port in ports if 0 <= port < 1 << 16]] = True
    columns = (table.src_port, table.dst_port)
    if all(not len(c) or 0 <= int(c.min()) and int(c.max()) < 1 << 16 for c in columns):
        return found.take(table.src_port) | found.take(table.dst_port)
    wanted = np.array(ports, dtype=np.int64)
    return np.isin(table.dst_port, wanted) | np.isin(table.src_port, wanted)


class _Publication:
    __slots__ = ("receiver", "session_id", "initial_term_id", "term_length", "sent", "limit", "stalled_at", "spans")

    def __init__(self, receiver: int, session_id: int) -> None:
        self.receiver = receiver
        self.session_id = session_id
        self.initial_term_id: int | None = None
        self.term_length = DEFAULT_TERM_LENGTH
        self.sent: int | None = None  # the highest position the sender's data reached
        self.limit: int | None = None  # the flow-control limit the status messages set
        self.stalled_at: int | None = None  # the stall's start, while the sender sits at its limit
        self.spans: list[tuple[int, int | None]] = []

    def position(self, term_id: int, term_offset: int) -> int:
        if self.initial_term_id is None:
            self.initial_term_id = term_id
        terms = ((term_id - self.initial_term_id + (1 << 31)) % (1 << 32)) - (1 << 31)  # int32 wrap
        return terms * self.term_length + term_offset

    def on_data(self, ts: int, end: int) -> None:
        if self.sent is not None and end <= self.sent:
            return
        self.sent = end
        if self.stalled_at is not None:
            self.spans.append((self.stalled_at, ts))
            self.stalled_at = None
        if self.limit is not None and end >= self.limit:
            self.stalled_at = ts

    def on_status(self, limit: int) -> None:
        if self.limit is None or limit > self.limit:
            self.limit = limit

    def finish(self) -> list[tuple[int, int | None]]:
        return self.spans + ([(self.stalled_at, None)] if self.stalled_at is not None else [])


class FlowControlScanner:
    """Feed the datagrams of a capture in order (`feed`, or `feed_columns` for a whole table); `stalls`."""

    def __init__(self, members: MemberMap, stream_id: int) -> None:
        self.members = members
        self.stream_id = stream_id
        self._ports = sorted({endpoint.port for member in members.members
                              for role, endpoint in member.endpoints.items() if role == "consensus"})
        self._publications: dict[tuple, _Publication] = {}

    def _consensus_member(self, endpoint: tuple[str, int]) -> int | None:
        found = self.members.lookup(*endpoint)
        return found[0] if found is not None and found[1] == "consensus" else None

    def feed(self, ts: int, src: tuple[str, int], dst: tuple[str, int], payload: bytes | memoryview, *,
             capture: int = 0) -> None:
        if len(payload) < 8:
            return
        frame_length, _, flags, frame_type = _HEADER.unpack_from(payload, 0)
        if frame_type == _TYPE_DATA and len(payload) >= 24:
            receiver = self._consensus_member(dst)
            if receiver is None:
                return
            term_offset, session_id, stream_id, term_id = _DATA.unpack_from(payload, 8)
            if stream_id != self.stream_id:
                return
            publication = self._publication(capture, src, dst, receiver, session_id)
            length = 0 if frame_length <= 0 else -(-len(payload) // FRAME_ALIGNMENT) * FRAME_ALIGNMENT
            publication.on_data(ts, publication.position(term_id, term_offset) + length)
        elif frame_type == _TYPE_SM and len(payload) >= 28 and not flags & _SM_SETUP_FLAG:
            receiver = self._consensus_member(src)
            if receiver is None:
                return
            session_id, stream_id, term_id, term_offset, window = _SM.unpack_from(payload, 8)
            if stream_id != self.stream_id:
                return
            publication = self._publication(capture, dst, src, receiver, session_id)
            publication.on_status(publication.position(term_id, term_offset) + window)
        elif frame_type == _TYPE_SETUP and len(payload) >= 32:
            receiver = self._consensus_member(dst)
            if receiver is None:
                return
            _, session_id, stream_id, initial_term_id, _, term_length = _SETUP.unpack_from(payload, 8)
            if stream_id != self.stream_id:
                return
            publication = self._publication(capture, src, dst, receiver, session_id)
            if publication.sent is None and publication.limit is None and term_length > 0:
                publication.initial_term_id, publication.term_length = initial_term_id, term_length

    def feed_columns(self, table: PacketColumns, *, capture: int = 0,
                     read: Callable[[int, int], None] | None = None) -> None:
        """Every datagram of ``table`` to or from a consensus endpoint, in row order (``read``: see
        `header_words`)."""
        if not len(table):
            return
        names = table.addresses
        rows = np.flatnonzero(on_ports(table, self._ports) & (table.payload_length >= 24))
        # Only publications that could have reached their receiver's window are read one by one: one whose
        # data stayed in its first term below the smallest window its receiver gave never did (a consensus
        # publication starts at its term's offset 0).  Heartbeats (DATA frames of length 0) never take a
        # sender past what it sent and are skipped.  Reassembled datagrams (no offset in the file) are all read.
        direct = table.payload_offset[rows] >= 0
        if direct.all() and len(rows):
            rows = self._could_reach_limit(table, rows, header_words(table, rows, read))
        for row in rows.tolist():
            self.feed(int(table.ts_ns[row]), (names[table.src[row]], int(table.src_port[row])),
                      (names[table.dst[row]], int(table.dst_port[row])), table.payload(row), capture=capture)

    def _could_reach_limit(self, table: PacketColumns, rows: np.ndarray, words: np.ndarray) -> np.ndarray:
        """The ``rows`` (with their `header_words`) of the consensus stream's DATA, SM and SETUP frames whose
        publication (sender endpoint, receiver endpoint, session) had a status message and either data in
        more than one term or data reaching the smallest window its status messages gave, in row order."""
        frame_type = words.view(np.uint16)[:, 3]
        data = (frame_type == _TYPE_DATA) & (words[:, 0] > 0) & (words[:, 4] == self.stream_id)
        status = (frame_type == _TYPE_SM) & (words[:, 3] == self.stream_id)
        setup = (frame_type == _TYPE_SETUP) & (words[:, 4] == self.stream_id)
        # First by buckets of publications, the low 16 bits of the session id (a publication's rows all in one
        # bucket, a bucket's the union of a few publications' at most): a bucket that could not, holding a
        # smaller window and no more terms or data than any of its publications, has none that could.  Few
        # buckets pass (none in a steady capture), and only their rows are grouped by publication, exactly.
        session = np.where(status, words[:, 2], words[:, 3])
        bucket = session.astype(np.intp) & 0xFFFF
        buckets = 1 << 16
        big = np.iinfo(np.int64).max
        at_status = np.flatnonzero(status)
        least_window = np.full(buckets, big)
        np.minimum.at(least_window, bucket[at_status], words[at_status, 6].astype(np.int64))  # one dtype: ufunc.at's fast path
        at_data = np.flatnonzero(data)
        data_bucket = bucket[at_data]
        term_id = words[at_data, 5]
        some_term = np.zeros(buckets, dtype=term_id.dtype)
        some_term[data_bucket] = term_id  # one of each bucket's terms: any other shows a second term
        end = words[at_data, 2].astype(np.int64) + table.payload_length[rows[at_data]]
        passing = np.zeros(buckets, dtype=bool)
        passing[data_bucket[(term_id != some_term[data_bucket]) | (end >= least_window[data_bucket])]] = True
        passing &= least_window < big
        candidates = np.flatnonzero((data | status | setup) & passing[bucket])
        if not len(candidates):
            return candidates
        rows, words = rows[candidates], words[candidates]
        is_data, is_status = data[candidates], status[candidates]
        # one key per publication: (sender endpoint, receiver endpoint, session), from either direction
        src, sport, dst, dport = table.src[rows], table.src_port[rows], table.dst[rows], table.dst_port[rows]
        session = session[candidates]
        keys = endpoint_pair_keys(np.where(is_status, dst, src), np.where(is_status, dport, sport),
                                  np.where(is_status, src, dst), np.where(is_status, sport, dport), session)
        _, group = np.unique(keys, return_inverse=True)
        group = group.reshape(-1)
        groups = int(group.max()) + 1 if len(group) else 0
        term_id = words[:, 5].astype(np.int64)
        end = words[:, 2].astype(np.int64) + table.payload_length[rows]
        window = words[:, 6].astype(np.int64)
        least_window = np.full(groups, big)
        np.minimum.at(least_window, group[is_status], window[is_status])
        first_term = np.full(groups, big)
        np.minimum.at(first_term, group[is_data], term_id[is_data])
        last_term = np.full(groups, -big)
        np.maximum.at(last_term, group[is_data], term_id[is_data])
        furthest = np.zeros(groups, dtype=np.int64)
        np.maximum.at(furthest, group[is_data], end[is_data])
        could = (least_window < big) & ((last_term != first_term) & (last_term > -big) | (furthest >= least_window))
        return rows[could[group]]

    def _publication(self, capture: int, src: tuple[str, int], dst: tuple[str, int], receiver: int, session_id: int
                     ) -> _Publication:
        key = (capture, src, dst, session_id)
        publication = self._publications.get(key)
        if publication is None:
            publication = self._publications[key] = _Publication(receiver, session_id)
        return publication

    def stalls(self) -> dict[tuple[int, int], list[tuple[int, int | None]]]:
        """(receiver member, session id) → the spans its sender sat at its flow-control limit, in time order
        (a publication seen by several captures: the spans each saw)."""
        out: dict[tuple[int, int], list[tuple[int, int | None]]] = {}
        for publication in self._publications.values():
            spans = publication.finish()
            if spans:
                out.setdefault((publication.receiver, publication.session_id), []).extend(spans)
        return {key: sorted(spans, key=lambda span: span[0]) for key, spans in sorted(out.items())}
