"""A capture decoded in bulk: `datagrams.DatagramDecoder`'s rules, with the steady traffic done as arrays.

Theory of operation.  A cluster's capture is mostly steady traffic: on each stream, one whole message
(or heartbeat) per datagram, each exactly where the one before it ended, on a stream whose sender is
known and that nothing unusual is happening to.  Feeding such a datagram to the decoder changes the
stream's state in a way that can be written down for a whole run of them at once, and makes the same
two events (an ``out`` at the sender, an ``in`` held for the receiver) every time.  So `BulkDecoder`:

1. Sorts a capture's datagrams (`formats.pcap.PacketColumns`), with array operations over all of
   them, into: NAK and RTTM frames (only counted, as the decoder counts them); regular status
   messages (counted; each is a moment its stream's held ``in`` events are released, and a send of
   the member that sent it); *candidates*: a datagram that is one heartbeat, or one whole message
   (B|E) that decodes to a cluster message other than NewLeadershipTerm and NewLeadershipTermEvent
   (the messages with side effects on other streams); and everything else, which the decoder is fed
   one datagram at a time (`DatagramDecoder.feed_keyed`).  (The heartbeat that ends a log stream,
   whose LogEndOfStream event the decoder makes, is fed too.)
2. Walks the capture in packet order.  A datagram of the last kind is fed to the decoder.  A
   candidate is fed too, unless its stream is *steady* (`_steady`: the reassembler has nothing
   waiting or half assembled and no hole, `formats.reassembly.Reassembler.steady`; the receiver has
   an image and no join position pending; the sender is known, or it is ingress; one capture): then
   the candidate and those after it on the stream form a *run* up to the stream's next datagram that
   is fed one by one, or the first candidate that does not continue the one before it (another
   term, another offset, another named sender).  A run is checked against the stream's state (its
   first frame is at the rebuild position; the messages fit the assumed term length; the sender the
   messages name is the publication's) and applied: `Reassembler.skip_ahead`, the stream's last
   time, packet and end position, the frames counted; its events and its sender's sends are kept as
   arrays.
3. Status messages asking for a SETUP are fed one by one; the decoder asks this object which of
   the stream's ``in`` events were still held (`last_status`, `drop_held`) and what the member sent
   before (`sends`), which is what its own bookkeeping would say had it been fed every datagram.
4. `finish` lets the decoder finish, then builds the runs' events as columns, adds the events the
   decoder made one by one, and sorts them all by ``(ts, capture, packet, order, in/out)``: the
   events, in the order, that feeding every datagram would give (the tests compare the two on every
   sample and real capture).

Several captures of one incident (``local_members``) are fed one datagram at a time (their events
still come out as columns): which capture a message is taken from depends on the order of all of
them.  Deterministic: no clocks, no threads.
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import heapq
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from formats.cluster_codecs import MESSAGES_BY_TEMPLATE_ID, SCHEMA_ID
from formats.cluster_codecs_ext import decode_cluster
from formats.errors import DecodeError
from formats.event_columns import EXTRA_LOG, EXTRA_PACKET, Entries, EventColumns, stable_order
from formats.events import CHANNELS, DIRECTIONS
from formats.pcap import Packet, PacketColumns
from formats.udp import (
    DataFrame,
    PadFrame,
    SetupFrame,
    decode_datagram,
)
from recorder.capture.datagrams import MAX_EXAMPLES, RESTART_SILENCE_NS, DatagramDecoder, Keyed
from recorder.capture.members import SENDER_FIELD

# What a datagram is, for the walk.
_FED, _STATUS, _COUNTED, _HEARTBEAT, _MESSAGE = 0, 1, 2, 3, 4
#: Messages whose decoding touches other streams (the log's leader, log sessions): always fed.
_SIDE_EFFECTS = frozenset({"NewLeadershipTerm", "NewLeadershipTermEvent"})
_NO_SENDER = -1
_IN, _OUT = DIRECTIONS.index("in"), DIRECTIONS.index("out")
_CHANNEL = {name: code for code, name in enumerate(CHANNELS)}
#: How often (in datagrams fed or runs applied) the progress callback hears about bytes read.
PROGRESS_EVERY = 4096
#: The capture's bytes are read a stretch of about this many at a time (see `BulkDecoder.feed`).
STRETCH_BYTES = 1 << 22
#: Whole messages' bytes (padded to 8) held before those read are grouped (see `_Capture._entries`).
HELD_MESSAGE_BYTES = 1 << 25
#: Odd 64-bit multipliers, one per 8 bytes of a message, for the hash `_Capture._entries` groups by.
def _splitmix(count: int) -> np.ndarray:
    """``count`` well-mixed odd 64-bit numbers (SplitMix64 over 1, 2, 3, ...), the same on every run."""
    x = np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (x ^ (x >> np.uint64(31))) | np.uint64(1)


_MULTIPLIERS = _splitmix(8192)


class BulkDecoder:
    """Feeds captures to one `DatagramDecoder`, the steady traffic in bulk; see the module docstring."""

    def __init__(self, decoder: DatagramDecoder) -> None:
        self.decoder = decoder
        decoder.bulk = self
        self.keyed: list[Keyed] = []
        self.entries = Entries()
        self._entry_of: dict[bytes, int] = {}
        self._entry_named: list[int] = []  # the sender a consensus message names, per entry (or -1)
        self._entry_fed: list[bool] = []  # entries whose datagrams are always fed one by one
        #: (length, 64-bit hash) of message bytes seen → (entry, the bytes, padded to 8): see `_entries`
        self._by_digest: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
        self._captures: dict[int, _Capture] = {}  #: the capture being walked
        self._made: list[tuple[EventColumns, list[np.ndarray]]] = []  #: the runs' events of those walked

    # --- feeding ----------------------------------------------------------------------------------
    def feed(self, columns: PacketColumns, *, capture: int, progress: Callable[[int], None] | None = None,
             read: Callable[[int, int], None] | None = None) -> None:
        """Every datagram of one capture, in packet order (times already filled in).  ``read(start, end)``
        is told of each stretch of the capture's bytes that has been read (a caller with the file memory
        mapped may let those pages go: they are read a stretch at a time, never all at once)."""
        state = _Capture(self, columns, capture, read)
        del columns  # the walk lets the capture's columns go before making its runs' events
        self._captures[capture] = state
        give_back_memory()  # the sorting's arrays, freed
        state.walk(progress)

    def finish(self) -> EventColumns:
        """The decoder's `finish_keyed`, then every event of every capture, sorted, as columns."""
        self.keyed += self.decoder.finish_keyed()
        self.decoder.bulk = None
        keyed = self.keyed
        python = EventColumns.from_events([event for _, event in keyed], entries=self.entries)
        table = np.array([key for key, _ in keyed], dtype=np.int64).reshape(-1, 5)
        keys = [table[:, k] for k in range(5)]
        self.keyed = []
        parts = [python] + [columns for columns, _ in self._made]
        part_keys = [keys] + [made_keys for _, made_keys in self._made]
        self._made = []
        order = _sort_order(part_keys)
        del part_keys
        return EventColumns.gathered(parts, order)

    # --- asked by the decoder -----------------------------------------------------------------------
    def last_status(self, key: tuple, packet: int) -> int:
        """The packet number of the stream's last status message before ``packet`` (-1: none)."""
        state = self._captures.get(key[0])
        return state.last_status(key, packet) if state is not None else -1

    def answered(self, key: tuple, since: int, packet: int) -> bool:
        """Did the stream's receiver send a regular status message after packet ``since`` and before
        ``packet``?"""
        state = self._captures.get(key[0])
        return state.answered(key, since, packet) if state is not None else False

    def drop_held(self, key: tuple, released: int, packet: int, down: int | None) -> int:
        """Runs' ``in`` events on this stream made after ``released`` and before ``packet`` were still
        held when the receiver asked for a SETUP: those that arrived after ``down`` are dropped."""
        state = self._captures.get(key[0])
        return state.drop_held(key, released, packet, down) if state is not None else 0

    def sends(self, member: tuple[int, int]) -> np.ndarray:
        """(packet, time) of what ``member`` sent in the status messages and runs decoded in bulk."""
        state = self._captures.get(member[0])
        return state.sends(member[1]) if state is not None else np.zeros((0, 2), np.int64)

    def activity(self, member: tuple[int, int], own: np.ndarray) -> list[tuple[int, int]] | None:
        """``member``'s spans of activity (`DatagramDecoder._activity`) in a capture being walked, ``own``
        being the (packet, time) of what the decoder was fed; None: work them out from every send."""
        state = self._captures.get(member[0])
        return state.activity(member[1], own) if state is not None else None

    # --- entries ------------------------------------------------------------------------------------
    def entry(self, payload: bytes) -> int:
        """The entry of a whole message's bytes, decoded once (-1: it does not decode: fed one by one)."""
        number = self._entry_of.get(payload)
        if number is not None:
            return number
        number = -1
        decoded = _decode_quietly(payload)
        if decoded is not None:
            message, fields, type_name = decoded
            number = self.entries.add(type_name, fields, payload, key=payload)
            attr = SENDER_FIELD.get(type_name)
            self._entry_named.append(getattr(message, attr) if attr is not None else _NO_SENDER)
            self._entry_fed.append(type_name in _SIDE_EFFECTS)
        self._entry_of[payload] = number
        return number


def _decode_quietly(payload: bytes) -> tuple[Any, dict[str, Any], str] | None:
    """What `DatagramDecoder._decode` gives for bytes it decodes without a problem, else None."""
    if len(payload) < 8:
        return None
    template_id = int.from_bytes(payload[2:4], "little")
    schema_id = int.from_bytes(payload[4:6], "little")
    spec = MESSAGES_BY_TEMPLATE_ID.get(template_id)
    if schema_id != SCHEMA_ID or spec is None:
        return None
    try:
        message = decode_cluster(payload).message
    except DecodeError:
        return None
    return message, message.to_fields(), spec.name


class _Capture:
    """One capture's datagrams, sorted for the walk, and the runs found in it."""

    def __init__(self, bulk: BulkDecoder, columns: PacketColumns, capture: int,
                 read: Callable[[int, int], None] | None = None) -> None:
        self.bulk = bulk
        self.read = read
        self.decoder = bulk.decoder
        self.columns = columns
        self.capture = capture
        self.runs: list[tuple] = []  # (stream, first, end, sender, receiver, channel, base, sends_as)
        self.dropped: list[np.ndarray] = []  # candidate positions whose held ``in`` event was dropped
        self._in_time_order = False  # times never go back and row order is packet order (set as the walk begins)
        self._silences: np.ndarray | None = None  # `activity`: candidates followed by a silence
        self.c_ts: np.ndarray | None = None  # each candidate's time (as the walk ends)
        self._sort(columns)

    # --- sorting the datagrams ----------------------------------------------------------------------
    def _sort(self, columns: PacketColumns) -> None:
        count = len(columns)
        offset = columns.payload_offset
        length = columns.payload_length
        kind = np.zeros(count, dtype=np.int8)  # _FED
        # The first frame's header where the payload is in the file (a rebuilt IP datagram is fed), and
        # what it is: counted (NAK, status message, RTTM), a heartbeat or a whole message alone in its
        # DATA frame (`_frame_kinds`), each such message's entry.  The fields are read in place from
        # ``heads`` (kept for the streams of the datagrams fed one by one).
        has = np.flatnonzero((offset >= 0) & (length >= 8))
        heads, counted, heartbeat, message, entry = self._read_heads(offset[has], length[has])
        frame_length, flags, frame_type = _field(heads, 0, "<i4"), heads[:, 5], _field(heads, 6, "<u2")
        status = counted & (frame_type == 3)
        regular = status & ((flags & 0x80) == 0)
        kind[has[counted & (frame_type != 3)]] = _COUNTED
        kind[has[regular]] = _STATUS
        self.counted = {"NAK": int(np.count_nonzero(counted & (frame_type == 2))),
                        "RTTM": int(np.count_nonzero(counted & (frame_type == 6))),
                        "SM": int(np.count_nonzero(regular))}
        all_status = has[status]  # regular ones and those asking for a SETUP: their stream's key is reversed
        s_session, s_stream = _field(heads, 8, "<i4")[status], _field(heads, 12, "<i4")[status]
        status_flags = flags[status]
        del status, regular, counted
        fed = np.array(self.bulk._entry_fed + [True], dtype=bool)[entry]  # -1 (undecodable) is fed too
        message[np.flatnonzero(message)[fed]] = False
        entry = entry[~fed]
        kind[has[heartbeat]] = _HEARTBEAT
        kind[has[message]] = _MESSAGE
        self.kind = kind
        # The candidates' fields, in packet order.
        candidate = heartbeat | message
        rows = has[candidate]
        c_session = _field(heads, 12, "<i4")[candidate]
        c_stream = _field(heads, 16, "<i4")[candidate]
        c_term = _field(heads, 20, "<i4")[candidate]
        c_offset = _field(heads, 8, "<i4")[candidate]
        c_length = frame_length[candidate]
        c_eos = heartbeat[candidate] & ((flags[candidate] & 0x20) != 0)
        c_entry = np.full(len(rows), -1, dtype=np.int32)
        c_entry[message[candidate]] = entry
        del frame_length, flags, frame_type, heartbeat, message, candidate, entry
        # The datagrams fed one by one (their bytes copied now, a stretch of the file at a time), and the
        # streams each of them touches.
        fed_rows = np.flatnonzero(kind == _FED)
        self.fed_packets = self._packets(fed_rows)
        touched = self._fed_streams(fed_rows, has, heads)
        del heads, has
        # One number per stream (source, destination, session, stream id), whichever way it was seen.
        src, sport, dst, dport = columns.src, columns.src_port, columns.dst, columns.dst_port
        keys = [_joined(*parts) for parts in (
            ((src, rows), dst[all_status], touched[:, 1]), ((sport, rows), dport[all_status], touched[:, 2]),
            ((dst, rows), src[all_status], touched[:, 3]), ((dport, rows), sport[all_status], touched[:, 4]),
            (c_session, s_session, touched[:, 5]), (c_stream, s_stream, touched[:, 6]))]
        del s_session, s_stream, c_session, c_stream
        stream_of = _group(*keys)
        streams = int(stream_of.max()) + 1 if len(stream_of) else 0
        first = np.full(streams, -1, dtype=np.int64)
        first[stream_of[::-1]] = np.arange(len(stream_of))[::-1]  # a representative of each stream
        self.key_parts = [k[first] for k in keys]
        del keys, first
        # How many streams (destinations) each stream's publication (source, session, stream id) has.
        src_k, sport_k, _, _, session_k, stream_k = self.key_parts
        publication_of = _group(src_k, sport_k, session_k, stream_k)
        self.publication_streams = np.bincount(publication_of)[publication_of] if len(publication_of) else publication_of
        self.stream_count = streams
        n_candidates, n_status = len(rows), len(all_status)
        c_stream_id = stream_of[:n_candidates]
        s_stream_id = stream_of[n_candidates:n_candidates + n_status]
        t_stream_id = stream_of[n_candidates + n_status:]
        del stream_of
        # Candidates grouped by stream, each group in packet order (positions below are into this order).
        order = stable_order(c_stream_id)
        n = len(order)
        self.c_row = rows[order].astype(np.int32)
        self.c_kind = kind[self.c_row]
        self.c_entry = c_entry[order]
        self.c_eos = c_eos[order]
        self.c_term = c_term[order]
        self.c_offset = c_offset[order]
        self.c_length = c_length[order]
        c_stream_id = c_stream_id[order]
        del rows, c_entry, c_eos, c_term, c_offset, c_length, order
        self.c_start = np.searchsorted(c_stream_id, np.arange(streams), side="left")
        self.c_end = np.searchsorted(c_stream_id, np.arange(streams), side="right")
        is_message = self.c_kind == _MESSAGE
        positions = np.arange(n, dtype=np.int32)
        named = np.array(self.bulk._entry_named + [_NO_SENDER], dtype=np.int32)[self.c_entry]
        self.c_named = np.where(is_message, named, _NO_SENDER).astype(np.int32)
        # Where each candidate continues the one before it on its stream: the same term, at the offset
        # after it (a heartbeat is at the position it announces), naming the same sender if any.
        aligned_length = np.where(is_message, (self.c_length.astype(np.int64) + 31) & ~31, 0)
        boundary = np.ones(n, dtype=bool)  # a run cannot go on from the candidate before this one
        boundary[1:] = ((c_stream_id[1:] != c_stream_id[:-1]) | (self.c_term[1:] != self.c_term[:-1])
                        | (self.c_offset[1:] != self.c_offset[:-1] + aligned_length[:-1]))
        del aligned_length
        named_at = np.where(self.c_named != _NO_SENDER, positions, -1)
        last_named = np.maximum.accumulate(named_at) if n else named_at
        before = np.full(n, -1, dtype=np.int32)
        before[1:] = last_named[:-1]
        stream_start = np.repeat(self.c_start, self.c_end - self.c_start)
        before = np.where(before >= stream_start, before, -1)  # the last candidate naming a sender before it
        boundary |= (self.c_named != _NO_SENDER) & (before >= 0) & (self.c_named != self.c_named[np.maximum(before, 0)])
        del named_at, last_named, before, stream_start
        message_at = np.where(is_message, positions, -1)
        self.c_last_message = np.maximum.accumulate(message_at) if n else message_at
        next_named = np.where(self.c_named != _NO_SENDER, positions, n)
        self.c_next_named = np.minimum.accumulate(next_named[::-1])[::-1] if n else next_named
        next_message = np.where(is_message, positions, n)
        self.c_next_message = np.minimum.accumulate(next_message[::-1])[::-1] if n else next_message
        eos_at = np.where(self.c_eos, positions, n)
        self.c_next_eos = np.minimum.accumulate(eos_at[::-1])[::-1] if n else eos_at
        del message_at, next_named, eos_at, is_message
        # The datagrams fed one by one that touch each stream: a run stops at the next of them, and each
        # makes its streams be checked again at their next candidate.
        big = count + 1
        candidate_key = c_stream_id * big + self.c_row
        fed_key = np.unique(t_stream_id * big + touched[:, 0])
        after = np.searchsorted(candidate_key, fed_key, side="right")  # each fed datagram's next candidate
        boundary[after[after < n]] = True  # (the keys increase: a candidate with fed datagrams of its stream before it)
        starts_at = np.append(np.flatnonzero(boundary), n)
        self.c_run_end = starts_at[np.cumsum(boundary)].astype(np.int32)  # the next start after each (boundary[0] is set)
        del boundary, starts_at, positions
        fed_stream, fed_row = fed_key // big, fed_key % big
        here = (after < n) & (c_stream_id[np.minimum(after, max(n - 1, 0))] == fed_stream) if n else after < 0
        self._touched_index: dict[int, list[tuple[int, int]]] = {}
        for row, stream, position in zip(fed_row[here].tolist(), fed_stream[here].tolist(), after[here].tolist(),
                                         strict=True):
            self._touched_index.setdefault(row, []).append((stream, position))
        del candidate_key, fed_key, after, fed_stream, fed_row, here, c_stream_id
        status_order = stable_order(s_stream_id)
        status_sorted = s_stream_id[status_order]
        self.s_packet = columns.index[all_status[status_order]]
        self.s_flags = status_flags[status_order]
        self.s_regular = (self.s_flags & 0x80) == 0  # not asking for a SETUP: never fed
        self.s_row = all_status[status_order]
        self.s_start = np.searchsorted(status_sorted, np.arange(streams), side="left")
        self.s_end = np.searchsorted(status_sorted, np.arange(streams), side="right")
        # What members sent in their status messages.
        owner = self._owners(columns.src[all_status], columns.src_port[all_status])
        sent = owner >= 0
        self.status_sends = (owner[sent], columns.index[all_status[sent]], columns.ts_ns[all_status[sent]])
        self._stream_keys: list[tuple] | None = None
        self._stream_ids: dict[tuple, int] | None = None

    def _fed_streams(self, fed: np.ndarray, has: np.ndarray, heads: np.ndarray) -> np.ndarray:
        """(row, src, sport, dst, dport, session, stream) of each stream a datagram fed one by one touches:
        its DATA, PAD and SETUP frames' streams, or the stream a status message reports on.  Read from
        the first frame's header (``heads``: the first 24 bytes of the payloads of rows ``has``) where
        the datagram is that frame alone, else from the frames `_packets` copied.  A stream listed that
        the decoder then does not touch (a datagram it finds corrupt) only ends a run early."""
        c = self.columns
        at = np.searchsorted(has, fed)
        known = (at < len(has)) & (has[np.minimum(at, max(len(has) - 1, 0))] == fed) if len(has) else fed < 0
        rows, at = fed[known], at[known]
        frame_type = _field(heads, 6, "<u2")[at]
        frame_length = _field(heads, 0, "<i4")[at].astype(np.int64)
        size = c.payload_length[rows].astype(np.int64)
        first = np.where(frame_type == 0, 32, (frame_length + 31) & ~31)
        alone = ~(np.isin(frame_type, (0, 1)) & (size > np.maximum(first, 32)))  # else: more frames after it
        keyed = []
        # (A DATA, PAD or SETUP frame's session and stream ids at bytes 12 and 16; a status message's at 8 and 12.)
        for types, session, stream, reverse in (((0, 1, 5), 12, 16, False), ((3,), 8, 12, True)):
            pick = np.isin(frame_type, types) & alone
            picked = rows[pick]
            a, b = (c.dst, c.dst_port) if reverse else (c.src, c.src_port)
            d, e = (c.src, c.src_port) if reverse else (c.dst, c.dst_port)
            keyed.append(np.stack([picked, a[picked], b[picked], d[picked], e[picked],
                                   _field(heads, session, "<i4")[at[pick]], _field(heads, stream, "<i4")[at[pick]]],
                                  axis=1).astype(np.int64))
        slow = set(fed[~known].tolist()) | set(rows[~alone].tolist())
        extra = []
        for row, packet in zip(fed.tolist(), self.fed_packets, strict=True):
            if row in slow:
                extra.extend(self._streams_of(row, packet.payload))
        if extra:
            keyed.append(np.array(extra, dtype=np.int64).reshape(-1, 7))
        return np.concatenate(keyed) if keyed else np.zeros((0, 7), dtype=np.int64)

    def _stretches(self, offsets: np.ndarray) -> Iterator[slice]:
        """Consecutive rows (by ``offsets`` into the file, increasing) a stretch of about `STRETCH_BYTES`
        at a time; after each, the caller's ``read`` hears that the stretch is done."""
        if not len(offsets):
            return
        marks = np.searchsorted(offsets, np.arange(int(offsets[0]), int(offsets[-1]) + STRETCH_BYTES,
                                                   STRETCH_BYTES)[1:], side="left")
        start = 0
        for end in [*marks.tolist(), len(offsets)]:
            if end <= start:
                continue
            yield slice(start, end)
            if self.read is not None:
                self.read(int(offsets[start]), int(offsets[end - 1]))
            start = end

    def _read_heads(self, at: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, ...]:
        """The first 24 bytes of the payloads at ``at`` (file offsets, increasing; ``size`` bytes each), a
        row each (0 past the end of the file; `_field` reads them), with what `_frame_kinds` makes of
        them and the entry of each whole message (`_entries`).  The file is read a stretch at a time,
        the messages' bytes just after their headers (the same pages, while they are at hand)."""
        raw = np.frombuffer(self.columns.data, dtype=np.uint8)
        heads = np.zeros((len(at), 24), dtype=np.uint8)
        whole = int(np.searchsorted(at, len(raw) - 24, side="right"))  # before it, all 24 bytes are in the file
        windows = _windows(raw, 24) if whole else None
        kinds: list[tuple[np.ndarray, ...]] = []
        messages = _Messages()
        for part in self._stretches(at):
            inside = slice(part.start, min(part.stop, whole))
            if inside.stop > inside.start:
                heads[inside] = windows[at[inside]].view(np.uint8).reshape(-1, 24)
            for row in range(max(part.start, whole), part.stop):  # the last few payloads, near the end of the file
                tail = raw[at[row]:at[row] + 24]
                heads[row, :len(tail)] = tail
            counted, heartbeat, message = _frame_kinds(heads[part], size[part])
            kinds.append((counted, heartbeat, message))
            frame_length = _field(heads[part], 0, "<i4")[message]
            messages.add(raw, at[part][message] + 32, frame_length.astype(np.int64) - 32)
            if messages.size >= HELD_MESSAGE_BYTES:
                self._entries(messages)
        self._entries(messages)
        if not kinds:
            none = np.zeros(0, dtype=bool)
            return heads, none, none, none, messages.entry
        counted, heartbeat, message = (np.concatenate(masks) for masks in zip(*kinds, strict=True))
        return heads, counted, heartbeat, message, messages.entry

    def _entries(self, messages: _Messages) -> None:
        """The entry of each message held (`_Messages.entry`), then let go: those of one length are
        grouped by their bytes with array operations (a 64-bit hash, each member checked against the
        first bytes seen with that hash), and each distinct one is decoded once (`BulkDecoder.entry`)."""
        numbers = messages.entry
        seen = self.bulk._by_digest
        for length in sorted(messages.cells):
            rows = np.concatenate(messages.rows.pop(length))
            if length == 0:
                numbers[rows] = self.bulk.entry(b"")
                continue
            parts = messages.cells.pop(length)
            cells = parts[0] if len(parts) == 1 else np.concatenate(parts)
            del parts
            words = cells.view(np.uint64)
            digest = words @ _MULTIPLIERS[:words.shape[1]]  # a hash of the words (collisions checked below)
            distinct, inverse = _numbered(digest)
            first_of = np.empty(len(distinct), dtype=np.int64)
            first_of[inverse] = np.arange(len(inverse))  # one member of each group (the last)
            known = []
            for d, k in zip(distinct.tolist(), first_of.tolist(), strict=True):
                found = seen.get((length, d))
                if found is None:
                    found = seen[(length, d)] = (self.bulk.entry(cells[k, :length].tobytes()), words[k].copy())
                known.append(found)
            expected = np.stack([cell for _, cell in known])
            if not _same_rows(words, inverse, expected):  # two payloads with one hash: tell them apart by bytes
                numbers[rows] = [self.bulk.entry(cell.tobytes()[:length]) for cell in cells]
                continue
            numbers[rows] = np.array([number for number, _ in known], dtype=np.int32)[inverse]
        messages.cells, messages.rows, messages.size = {}, {}, 0

    def _streams_of(self, row: int, payload: bytes | memoryview) -> list[tuple]:
        """The streams a datagram fed one by one touches: its DATA, PAD and SETUP frames' streams, or
        for a status message the stream it reports on."""
        c = self.columns
        src, sport, dst, dport = int(c.src[row]), int(c.src_port[row]), int(c.dst[row]), int(c.dst_port[row])
        if len(payload) >= 16 and payload[6] == 3 and payload[7] == 0:  # a status message (any)
            session = int.from_bytes(payload[8:12], "little", signed=True)
            stream = int.from_bytes(payload[12:16], "little", signed=True)
            return [(row, dst, dport, src, sport, session, stream)]
        try:
            frames = decode_datagram(payload)
        except DecodeError:
            return []
        return list({(row, src, sport, dst, dport, f.session_id, f.stream_id): None for f in frames
                     if type(f) is DataFrame or type(f) is PadFrame or type(f) is SetupFrame})

    def _owners(self, addresses: np.ndarray, ports: np.ndarray) -> np.ndarray:
        """The member whose endpoint each (address, port) is (-1: nobody's)."""
        if not len(addresses):
            return np.zeros(0, dtype=np.int64)
        pairs = addresses.astype(np.int64) << 16 | ports.astype(np.int64)
        distinct, inverse = np.unique(pairs, return_inverse=True)
        names = self.columns.addresses
        owners = []
        for pair in distinct.tolist():
            found = self.decoder.members.lookup(names[pair >> 16], pair & 0xFFFF)
            owners.append(found[0] if found is not None else -1)
        return np.array(owners, dtype=np.int64)[inverse.reshape(-1)]

    # --- the walk -----------------------------------------------------------------------------------
    def walk(self, progress: Callable[[int], None] | None) -> None:
        decoder = self.decoder
        c = self.columns
        for name, count in self.counted.items():
            if count:
                decoder.frames[name] += count
        fed = np.flatnonzero(self.kind == _FED).tolist()
        packets, self.fed_packets = self.fed_packets, None
        ts, index = c.ts_ns, c.index
        self._in_time_order = not c.huge_ts and bool((ts[1:] >= ts[:-1]).all() and (index[1:] > index[:-1]).all())
        self._fed_count = 0
        self._pending = [-1] * self.stream_count
        self._states: list[Any] = [None] * self.stream_count
        self._stream_ends = self.c_end.tolist()
        # Each stream with candidates, checked at its first (`_schedule` for each, at once).
        live = np.flatnonzero(self.c_start < self.c_end)
        firsts = self.c_start[live]
        heap: list[tuple[int, int, int]] = list(zip(self.c_row[firsts].tolist(), live.tolist(), firsts.tolist(),
                                                    strict=True))
        heapq.heapify(heap)
        self._heap = heap
        for _, stream, position in heap:
            self._pending[stream] = position
        file_offset = c.file_offset
        done = 0
        steps = 0
        index = 0
        fed.append(1 << 62)
        self._fed_rows = fed  # (`_run` looks up the next of them)
        touched = self._touched_index
        pending, pop, check, feed, schedule = self._pending, heapq.heappop, self._check, self._feed, self._schedule
        while True:
            next_fed = fed[index]
            if heap and heap[0][0] < next_fed:
                row, stream, position = pop(heap)
                if pending[stream] != position:
                    continue  # replaced by an earlier check
                pending[stream] = -1
                check(stream, position)
            elif next_fed < 1 << 62:
                index += 1
                feed(packets[index - 1])
                for stream, position in touched.get(next_fed, ()):
                    schedule(stream, position)
            else:
                break
            steps += 1
            if steps % PROGRESS_EVERY == 0:
                current = min(next_fed, heap[0][0] if heap else next_fed)  # every row before it is done
                at = int(file_offset[current]) if current < len(c) else done
                if at > done:
                    if progress is not None:
                        progress(at - done)
                    if self.read is not None:  # the datagrams before it will not be read again
                        self.read(0, at)
                    done = at
        decoder.datagrams += len(c) - self._fed_count
        self.c_ts = c.ts_ns[self.c_row]
        # Every datagram of the capture has been seen: its members' spans of activity (`DatagramDecoder.heard`)
        # are worked out while this walk still knows what its runs and status messages sent.
        decoder.settle_activity(self.capture, self.senders())
        self.settle_status()
        if progress is not None:
            total = len(c.data)
            if total > done:
                progress(total - done)
        # The capture's events from its runs, now: its columns and the walk's arrays can then go (a
        # later capture's status messages never ask about this one's streams).
        self.c_packet = c.index[self.c_row]
        self.columns = None  # the capture's columns can go before its runs' events are made
        del c, file_offset, packets
        made = self.run_events()
        if made is not None:
            self.bulk._made.append(made)
        del self.bulk._captures[self.capture]
        give_back_memory()

    def _packets(self, rows: np.ndarray) -> list[Packet]:
        """The datagrams at ``rows`` (in file order), as the decoder takes them (`formats.pcap.Packet`),
        their payloads copied out of the capture a stretch at a time."""
        c = self.columns
        out: list[Packet | None] = [None] * len(rows)
        offsets = c.payload_offset[rows]
        for k in np.flatnonzero(offsets < 0).tolist():  # rebuilt from IP fragments: not in the file
            out[k] = c.packet(int(rows[k]))
        inside = np.flatnonzero(offsets >= 0)
        names, data = c.addresses, c.data
        for part in self._stretches(offsets[inside]):
            where = inside[part]
            picked = rows[where]
            for k, row, index, ts, src, sport, dst, dport, offset, length, file_offset, interface, caplen, origlen in zip(
                    where.tolist(), picked.tolist(), c.index[picked].tolist(), c.ts_ns[picked].tolist(),
                    c.src[picked].tolist(), c.src_port[picked].tolist(), c.dst[picked].tolist(),
                    c.dst_port[picked].tolist(), c.payload_offset[picked].tolist(), c.payload_length[picked].tolist(),
                    c.file_offset[picked].tolist(), c.interface_id[picked].tolist(), c.caplen[picked].tolist(),
                    c.origlen[picked].tolist(), strict=True):
                if c.huge_ts and row in c.huge_ts:
                    out[k] = c.packet(row)._replace(payload=bytes(data[offset:offset + length]))
                    continue
                out[k] = Packet(index, ts, names[src], sport, names[dst], dport, bytes(data[offset:offset + length]),
                                file_offset, interface, caplen, origlen, offset)
        return out

    def _schedule(self, stream: int, position: int) -> None:
        """Check the stream at its candidate ``position`` (unless an earlier check is already due)."""
        if position >= self._stream_ends[stream]:
            return
        pending = self._pending[stream]
        if pending != -1 and pending <= position:
            return
        self._pending[stream] = position
        heapq.heappush(self._heap, (self.c_row.item(position), stream, position))

    def _feed(self, packet: Packet) -> None:
        self.bulk.keyed += self.decoder.feed_keyed(packet, packet.index, capture=self.capture,
                                                   payload_offset=packet.payload_offset)
        self._fed_count += 1

    def _feed_row(self, row: int) -> None:
        self._feed(self.columns.packet(row))

    def _keys(self) -> list[tuple]:
        """The decoder's key of each stream (all made at the first call, from the columns as lists)."""
        if self._stream_keys is None:
            names = self.columns.addresses
            capture = self.capture
            self._stream_keys = [(capture, names[src], sport, names[dst], dport, session, stream_id)
                                 for src, sport, dst, dport, session, stream_id
                                 in zip(*(k.tolist() for k in self.key_parts), strict=True)]
        return self._stream_keys

    def _stream_key(self, stream: int) -> tuple:
        return self._keys()[stream]

    def _check(self, stream: int, position: int) -> None:
        """A candidate of ``stream``: the start of a run if the stream is steady, else fed one by one.
        A run goes on at most to the end of the stretch of candidates that each continue the one before
        (`c_run_end`: the stream's next datagram fed one by one, or the next that does not continue)."""
        state = self._states[stream]
        if state is None:
            state = self._states[stream] = self.decoder._streams.get(self._stream_key(stream))
        applied = 0
        if state is not None:
            end = self.c_run_end.item(position)
            if state.reassembler is None:
                applied = self._skip(stream, position, end)
            else:
                applied = self._run(state, stream, position, end)
        if not applied:
            self._feed_row(self.c_row.item(position))
            applied = 1
        self._schedule(stream, position + applied)

    def _skip(self, stream: int, position: int, end: int) -> int:
        """Frames of a stream that is not decoded (archive traffic, ...): counted, once the problem's
        examples are all taken (`DatagramDecoder._problem` keeps `MAX_EXAMPLES`)."""
        decoder = self.decoder
        if decoder.skipped["skipped stream"] < MAX_EXAMPLES:
            return 0
        count = end - position
        decoder.frames["DATA"] += count
        decoder.skipped["skipped stream"] += count
        return count

    def _run(self, state: Any, stream: int, position: int, end: int) -> int:
        """Apply the run of ``stream``'s candidates from ``position`` (before ``end``) if the stream is
        steady and the run continues its state; how many candidates it took (0: none)."""
        decoder = self.decoder
        publication = state.publication
        sender = publication.sender
        channel = state.channel
        if (decoder.local_members is not None or decoder.observer is not None or state.awaiting_setup
                or state.arrivals or state.unreceived):
            return 0
        naming = False  # the message at ``position`` is the one that makes its publication's sender known
        if sender is None and channel != "ingress":
            if (channel == "consensus" or channel == "egress") and self.c_kind.item(position) == _MESSAGE:
                # A run of that message alone, its sender found as `DatagramDecoder._on_item` finds it (below,
                # once the run is sure to be applied); the messages after it are the next run's.
                if publication.pending:
                    return 0
                naming, end = True, position + 1
                if channel == "consensus":
                    sender = self.c_named.item(position)
                    if sender == _NO_SENDER:  # (a message that does not name it waits for it: fed)
                        return 0
            elif channel == "log":
                # Heartbeats alone before the sender is known, up to the next datagram fed one by one: only
                # such a datagram can name the log's sender (a NewLeadershipTerm, on another stream).
                end = min(end, self.c_next_message.item(position))
                upto = self._fed_rows[bisect.bisect_right(self._fed_rows, self.c_row.item(position))]
                end = position + int(np.searchsorted(self.c_row[position:end], upto))
            elif self.publication_streams.item(stream) != 1:
                # Heartbeats alone may pass before the sender is known, on a publication with no other stream
                # that could name it meanwhile.
                return 0
            else:
                end = min(end, self.c_next_message.item(position))
        if state.join is not None:  # a new image: its first frame must be at or past the join position
            join, join_shift, join_initial = state.join
            term = self.c_term.item(position)
            at = ((((term - join_initial + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000) << join_shift)
            if at + self.c_offset.item(position) < join:
                return 0
        reassembler = state.reassembler
        if channel == "log" and not state.eos_seen and reassembler.end_of_stream and state.receiver is not None:
            return 0
        steady = reassembler.steady()
        if steady is None:
            return 0
        initial, shift, next_position, term_length, length_known = steady
        term = self.c_term.item(position)
        base = ((((term - initial + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000) << shift)
        if base + self.c_offset.item(position) != next_position:
            return 0
        if not length_known:  # messages must lie within the assumed term (else it is corrected)
            beyond = np.flatnonzero((self.c_kind[position:end] == _MESSAGE) & (
                self.c_offset[position:end].astype(np.int64) + self.c_length[position:end] > term_length))
            if len(beyond):
                end = position + int(beyond[0])
        if channel == "consensus":
            named_at = self.c_next_named.item(position)
            if named_at < end and self.c_named.item(named_at) != sender:
                end = named_at  # a message naming another sender: fed, for its problem
        ended = min(self.c_next_eos.item(position), end)
        if ended < end and channel == "log" and not state.eos_seen and state.receiver is not None:
            end = ended  # the heartbeat that ends the log: fed, for its LogEndOfStream event
        if end <= position:
            return 0
        if naming:
            sender = self._sender_named(state, position, sender)
            if sender is None:
                return 0
        if ended < end:
            reassembler.end_of_stream = True
        last = end - 1
        last_message = self.c_last_message.item(last)
        if last_message >= position:
            next_position = base + self.c_offset.item(last_message) + ((self.c_length.item(last_message) + 31) & ~31)
            state.end_position = next_position
        highest = next_position if last_message == last else base + self.c_offset.item(last)  # a heartbeat's position
        reassembler.skip_ahead(next_position, highest)
        state.join = None  # from here on the reassembler's own position rules (as `_on_term_frame` says)
        first_message = self.c_next_message.item(position)
        if first_message < end:  # the publication's first message (`DatagramDecoder._on_term_frame`)
            if self._in_time_order:  # (else the earliest of the run's messages, wherever it is)
                ts = self.columns.ts_ns.item(self.c_row.item(first_message))
            else:
                rows = self.c_row[first_message:end][self.c_kind[first_message:end] == _MESSAGE]
                ts = int(self.columns.ts_ns[rows].min())
            if publication.first_data_ts is None or ts < publication.first_data_ts:
                publication.first_data_ts = ts
        row = self.c_row.item(last)
        state.last_ts = self.columns.ts_ns.item(row)
        state.last_packet = self.columns.index.item(row)
        state.seen_data = True
        decoder.frames["DATA"] += end - position
        # (What carried the message that made the sender known counts as sent by the member at its address.)
        sends_as = (sender if sender is not None and not naming
                    else decoder.members.member_at_ip(self._stream_key(stream)[1]))
        self.runs.append((stream, position, end, sender, state.receiver, channel, base, sends_as))
        return end - position

    def _sender_named(self, state: Any, position: int, named: int | None) -> int | None:
        """The sender of a publication not known yet, made known by its message at ``position`` as
        `DatagramDecoder._on_item` makes it (None, nothing changed: it stays unknown, the message is fed): a
        consensus message names it (``named``); an egress SessionEvent OK or NewLeaderEvent comes from the
        leader it names, else the decoder's `_resolve` may find it (the only member at the source address,
        session ids numbered beside another member's)."""
        decoder = self.decoder
        publication = state.publication
        entry = self.c_entry.item(position)
        type_name = self.bulk.entries.types[entry]
        if state.channel == "consensus":
            decoder._identify(publication, named, f"{type_name} names its sender", [])
            return named
        if type_name == "SessionEvent" or type_name == "NewLeaderEvent":
            message = decode_cluster(self.bulk.entries.payloads[entry]).message
            if type_name == "NewLeaderEvent":
                decoder._identify(publication, message.leader_member_id, "NewLeaderEvent comes from the leader", [])
            elif getattr(message.code, "name", "") == "OK":
                decoder._identify(publication, message.leader_member_id, "SessionEvent OK comes from the leader", [])
        if publication.sender is None:
            decoder._resolve(publication, state, [])
        return publication.sender

    # --- answers for the decoder --------------------------------------------------------------------
    def _stream_id(self, key: tuple) -> int | None:
        if self._stream_ids is None:
            self._stream_ids = {key: stream for stream, key in enumerate(self._keys())}
        return self._stream_ids.get(key)

    def last_status(self, key: tuple, packet: int) -> int:
        stream = self._stream_id(key)
        if stream is None:
            return -1
        # (bisect on the array between the stream's bounds: a handful of element reads, none of numpy's
        # per-call overhead for one lookup)
        start = int(self.s_start[stream])
        k = bisect.bisect_left(self.s_packet, packet, start, int(self.s_end[stream]))
        return int(self.s_packet[k - 1]) if k > start else -1

    def answered(self, key: tuple, since: int, packet: int) -> bool:
        stream = self._stream_id(key)
        if stream is None:
            return False
        start, end = int(self.s_start[stream]), int(self.s_end[stream])
        low = bisect.bisect_right(self.s_packet, since, start, end)
        high = bisect.bisect_left(self.s_packet, packet, low, end)
        return high > low and bool(self.s_regular[low:high].any())

    def settle_status(self) -> None:
        """The regular status messages of the capture's consensus and log streams, each after its stream
        was made (`DatagramDecoder._on_status` looks them up), handed to the decoder
        (`DatagramDecoder.settle_status`): its evidence of when publications were connected and images
        there is what feeding each of them would have recorded."""
        decoder = self.decoder
        streams = decoder._streams
        states = self._states
        limit = np.full(self.stream_count, np.iinfo(np.int64).max, dtype=np.int64)  # rows after it are the stream's
        keys = {}
        for stream in np.flatnonzero(self.s_end > self.s_start).tolist():
            key = self._stream_key(stream)
            state = states[stream] if states[stream] is not None else streams.get(key)
            if (state is None or state.reassembler is None or state.receiver is None
                    or state.channel not in ("consensus", "log")):
                continue
            # The stream was made by a datagram fed one by one: what came before it found no stream.
            limit[stream] = state.made_at
            keys[stream] = key
        # Every stream's at once: the rows are grouped by stream, in packet order within each.
        row_stream = np.repeat(np.arange(self.stream_count), self.s_end - self.s_start)
        mine = np.flatnonzero(self.s_regular & (self.s_packet > limit[row_stream]))
        rows = np.stack([self.s_packet[mine], self.columns.ts_ns[self.s_row[mine]], self.s_flags[mine]],
                        axis=1).astype(np.int64)
        owner = row_stream[mine]
        bounds = (np.flatnonzero(owner[1:] != owner[:-1]) + 1).tolist()
        starts = [0, *bounds] if len(owner) else []
        found = {keys[stream]: rows[start:end]
                 for stream, start, end in zip(owner[starts].tolist(), starts, [*bounds, len(owner)][:len(starts)],
                                               strict=True)}
        decoder.settle_status(found)

    def drop_held(self, key: tuple, released: int, packet: int, down: int | None) -> int:
        stream = self._stream_id(key)
        if stream is None:
            return 0
        lost = 0
        for run_stream, first, end, _, _, channel, _, _ in self.runs:
            if run_stream != stream or channel not in ("consensus", "log", "ingress"):
                continue
            positions = np.arange(first, end)
            made = self.columns.index[self.c_row[positions]]
            held = positions[(self.c_kind[positions] == _MESSAGE) & (made > released) & (made < packet)]
            if down is not None:
                held = held[self.columns.ts_ns[self.c_row[held]] > down]
            if len(held):
                self.dropped.append(held)
                lost += len(held)
        return lost

    def activity(self, member: int, own: np.ndarray) -> list[tuple[int, int]] | None:
        """`BulkDecoder.activity`: where the capture's times never go back (row order is packet order),
        ``member``'s sends in packet order are in time order, so its spans of activity are the stretches
        of them without a silence of more than `RESTART_SILENCE_NS`: those of each part (what it was fed,
        its status messages, each of its runs) joined where they overlap or are that close.  A run's
        stretches come from the silences between neighbouring candidates, found once for all runs (no
        array of all its sends, no sort of them).  None where times go back."""
        c = self.columns
        if not self._in_time_order:
            return None
        owners, _, times = self.status_sends
        starts, ends = [], []
        for part in (np.sort(own[:, 1]), times[owners == member]):
            if len(part):
                cut = np.flatnonzero(part[1:] - part[:-1] > RESTART_SILENCE_NS)
                starts += [part[:1], part[cut + 1]]
                ends += [part[cut], part[-1:]]
        spans = sorted((first, end) for _, first, end, _, _, _, _, sends_as in self.runs if sends_as == member)
        if spans:
            if self._silences is None:  # candidates after which their stream's next comes after a silence
                gaps = self.c_ts if self.c_ts is not None else c.ts_ns[self.c_row]
                self._silences = np.flatnonzero(gaps[1:] - gaps[:-1] > RESTART_SILENCE_NS)
            first = np.array([span[0] for span in spans], dtype=np.int64)
            last = np.array([span[1] for span in spans], dtype=np.int64) - 1
            silences = self._silences
            run = np.searchsorted(first, silences, side="right") - 1  # the run each silence's candidate is in
            inside = silences[(run >= 0) & (silences < last[np.maximum(run, 0)])]
            # (Runs never overlap: in position order, the k-th start of a stretch goes with the k-th end.)
            starts.append(c.ts_ns[self.c_row[np.sort(np.concatenate([first, inside + 1]))]])
            ends.append(c.ts_ns[self.c_row[np.sort(np.concatenate([last, inside]))]])
        if not starts:
            return []
        starts, ends = np.concatenate(starts), np.concatenate(ends)
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], np.maximum.accumulate(ends[order])
        joined = np.flatnonzero(starts[1:] - ends[:-1] > RESTART_SILENCE_NS)
        return list(zip(starts[np.concatenate([[0], joined + 1])].tolist(),
                        ends[np.concatenate([joined, [len(ends) - 1]])].tolist(), strict=True))

    def sends(self, member: int) -> np.ndarray:
        """(packet, time) of ``member``'s status messages, then of its runs' datagrams, run by run."""
        owners, packets, times = self.status_sends
        mine = owners == member
        spans = [(first, end) for _, first, end, _, _, _, _, sends_as in self.runs if sends_as == member]
        first = np.array([span[0] for span in spans], dtype=np.int64)
        lengths = np.array([span[1] for span in spans], dtype=np.int64) - first
        # Every run's positions, one after the other (as `run_events` lays them out).
        positions = (np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
                     + np.repeat(first, lengths))
        rows = self.c_row[positions]
        return np.stack([np.concatenate([packets[mine], self.columns.index[rows]]),
                         np.concatenate([times[mine], self.columns.ts_ns[rows]])], axis=1)

    def senders(self) -> set[int]:
        """The members that sent a status message or a run decoded in bulk."""
        out = set(np.unique(self.status_sends[0]).tolist())
        out.update(run[7] for run in self.runs if run[7] is not None)
        return out

    # --- the runs' events ---------------------------------------------------------------------------
    def run_events(self) -> tuple[EventColumns, list[np.ndarray]] | None:
        """The events of every run, and their sort keys (ts, capture, packet, order, in/out)."""
        if not self.runs:
            return None
        runs = self.runs
        first = np.fromiter((r[1] for r in runs), np.int64, len(runs))
        lengths = np.fromiter((r[2] for r in runs), np.int64, len(runs)) - first
        # Every run's candidates, one run after the other; then its messages.
        positions = np.arange(int(lengths.sum())) + np.repeat(first - (np.cumsum(lengths) - lengths), lengths)
        messages = np.flatnonzero(self.c_kind[positions] == _MESSAGE)
        positions = positions[messages]
        run_of = np.repeat(np.arange(len(runs)), lengths)[messages]
        del messages
        decoder = self.decoder
        channel = np.fromiter((_CHANNEL[r[5]] for r in runs), np.int8, len(runs))[run_of]
        sender = np.fromiter((_NO_SENDER if r[3] is None else r[3] for r in runs), np.int64, len(runs))[run_of]
        receiver = np.fromiter((_NO_SENDER if r[4] is None else r[4] for r in runs), np.int64, len(runs))[run_of]
        entry = self.c_entry[positions]
        # Messages counted by channel and type, as `_on_item` counts them.
        types = self.bulk.entries.types
        kinds = len(types)
        counts = np.bincount(channel.astype(np.int64) * kinds + entry, minlength=len(CHANNELS) * kinds)
        for pair in np.flatnonzero(counts).tolist():
            decoder._message_counts[CHANNELS[pair // kinds], types[pair % kinds]] += int(counts[pair])
        del counts
        log, egress, ingress = _CHANNEL["log"], _CHANNEL["egress"], _CHANNEL["ingress"]
        is_log = channel == log
        # (A log message's position: where it ends in its stream.)
        log_end = np.where(is_log, np.fromiter((r[6] for r in runs), np.int64, len(runs))[run_of]
                           + self.c_offset[positions] + ((self.c_length[positions].astype(np.int64) + 31) & ~31), 0)
        del run_of
        has_in = channel != egress
        if self.dropped:
            has_in &= ~np.isin(positions, np.concatenate(self.dropped))
        outs, ins = np.flatnonzero(channel != ingress), np.flatnonzero(has_in)
        del has_in
        picks = np.concatenate([outs, ins])
        out_rows = len(outs)
        direction = np.concatenate([np.full(out_rows, _OUT, np.int8), np.full(len(ins), _IN, np.int8)])
        node = np.concatenate([sender[outs], receiver[ins]])
        peer = np.concatenate([receiver[outs], sender[ins]])
        has_peer = np.concatenate([channel[outs] != egress, channel[ins] != ingress])
        picked = positions[picks]
        ts = self.c_ts[picked]
        packet = self.c_packet[picked]
        log = is_log[picks]
        log_position = log_end[picks]
        count = len(picks)
        columns = EventColumns(
            ts=ts, node=node, dir=direction, peer=np.where(has_peer, peer, 0), has_peer=has_peer,
            channel=channel[picks], entry=entry[picks],
            extra_kind=np.where(log, EXTRA_LOG, EXTRA_PACKET).astype(np.int8), packet=packet,
            log_position=log_position, captured=np.zeros(count, dtype=bool), captured_ts=np.zeros(count, np.int64),
            extra_ref=np.full(count, -1, dtype=np.int32), entries=self.bulk.entries, others=[])
        # (The small keys as small numbers: `finish` concatenates them with the other parts' as int64.)
        keys = [ts, np.full(count, self.capture, np.int32), packet, np.zeros(count, np.int8),
                np.concatenate([np.zeros(out_rows, np.int8), np.ones(len(ins), np.int8)])]
        return columns, keys


def give_back_memory() -> None:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim``; nothing elsewhere).

    A conversion makes and drops arrays of hundreds of megabytes; glibc keeps what was freed for the
    next allocation, so the process's resident memory would stay at its high-water mark in every
    later step."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


class _Messages:
    """Whole messages' bytes copied out of the file a stretch at a time, kept by length until they are
    grouped (`_Capture._entries`, when `HELD_MESSAGE_BYTES` are held and at the end): each one's bytes,
    zeros after them to a multiple of 8, and its number (in the order they were added); ``entry``, each
    one's entry once grouped."""

    def __init__(self) -> None:
        self.count = 0
        self.size = 0  #: bytes held
        self.cells: dict[int, list[np.ndarray]] = {}
        self.rows: dict[int, list[np.ndarray]] = {}
        self._entry = np.zeros(0, dtype=np.int32)

    @property
    def entry(self) -> np.ndarray:
        return self._entry[:self.count]

    def add(self, raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
        """The messages of ``lengths`` bytes at ``starts`` in ``raw`` (the file's bytes)."""
        if not len(lengths):
            return
        if self.count + len(lengths) > len(self._entry):  # (room for twice as many: copied a few times only)
            entry = np.empty(max(self.count + len(lengths), 2 * len(self._entry)), dtype=np.int32)
            entry[:self.count] = self._entry[:self.count]
            self._entry = entry
        counts = np.bincount(lengths)
        by_length = stable_order(lengths) + self.count  # each length's rows, in order (a counting sort)
        present = np.flatnonzero(counts)
        ends = np.cumsum(counts[present]).tolist()
        for length, first, last in zip(present.tolist(), [0, *ends[:-1]], ends, strict=True):
            rows = by_length[first:last]
            self.rows.setdefault(length, []).append(rows)
            cells = _cells(raw, starts[rows - self.count], length) if length else np.zeros((len(rows), 0), np.uint8)
            self.cells.setdefault(length, []).append(cells)
            self.size += cells.nbytes
        self.count += len(lengths)


#: The shortest valid frame of each type (`DatagramDecoder`'s checks): a NAK, a status message, an RTTM.
_MINIMUM_LENGTH = np.full(1 << 16, (1 << 31) - 1, dtype=np.int32)
_MINIMUM_LENGTH[[2, 3, 6]] = [28, 36, 40]


def _frame_kinds(heads: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of datagrams of ``size`` bytes whose first 24 are ``heads``: those whose first frame is counted (a
    NAK, status message or RTTM that `DatagramDecoder` would take), and those that are one DATA frame
    alone: a heartbeat, or a whole message (B|E) filling the datagram up to its padding."""
    frame_length, version, flags, frame_type = (_field(heads, 0, "<i4"), heads[:, 4], heads[:, 5],
                                                _field(heads, 6, "<u2"))
    counted = (version == 0) & (_MINIMUM_LENGTH.take(frame_type) <= frame_length) & (frame_length <= size)
    is_data = ~counted & (frame_type == 1) & (size >= 32) & (version == 0)
    term_offset = _field(heads, 8, "<i4")
    is_data &= (term_offset >= 0) & ((term_offset & 31) == 0)  # (aligned: neither kind otherwise)
    heartbeat = is_data & (frame_length == 0) & (size == 32)
    message = (is_data & (frame_length >= 32) & (frame_length <= size) & ((flags & 0xC0) == 0xC0)
               & (size <= (frame_length.astype(np.int64) + 31) & ~31))
    return counted, heartbeat, message


def _field(heads: np.ndarray, offset: int, kind: str) -> np.ndarray:
    """The field of type ``kind`` at byte ``offset`` of each row of ``heads`` (a view, not a copy)."""
    size = np.dtype(kind).itemsize
    return heads[:, offset:offset + size].view(kind)[:, 0]


def _sort_order(parts: list[list[np.ndarray]]) -> np.ndarray:
    """The order of rows by keys (ts, capture, packet, order, in/out), given part by part (each part's
    five arrays, its rows after the previous part's): the last four packed into one number when they
    fit (two sorts instead of five), written part by part (the keys are never joined whole)."""
    parts = [keys for keys in parts if len(keys[0])]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    widths = []
    for k in range(1, 5):
        low, high = min(int(keys[k].min()) for keys in parts), max(int(keys[k].max()) for keys in parts)
        widths.append(max(1, high.bit_length()) if low >= 0 else 64)
    ts = np.concatenate([keys[0] for keys in parts]).astype(np.int64, copy=False)
    if sum(widths) > 62:
        return np.lexsort([ts if k == 0 else np.concatenate([keys[k] for keys in parts]).astype(np.int64, copy=False)
                           for k in range(4, -1, -1)])
    packed = np.empty(len(ts), dtype=np.int64)
    start = 0
    for keys in parts:
        part = packed[start:start + len(keys[0])]
        part[:] = keys[1]
        for key, width in zip(keys[2:], widths[1:], strict=True):
            part <<= width
            part |= key
        start += len(part)
    return np.lexsort((packed, ts))


def _joined(*pieces: np.ndarray | tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """``np.concatenate(pieces).astype(np.int32)``, each piece written in place (a piece ``(values,
    rows)`` is ``values[rows]``, taken there when the values are int32 already)."""
    sizes = [len(piece[1]) if type(piece) is tuple else len(piece) for piece in pieces]
    out = np.empty(sum(sizes), dtype=np.int32)
    start = 0
    for piece, size in zip(pieces, sizes, strict=True):
        place = out[start:start + size]
        if type(piece) is tuple and piece[0].dtype == np.int32:
            piece[0].take(piece[1], out=place, mode="clip")  # (the rows are in range: clip only avoids a copy)
        else:
            place[:] = piece[0][piece[1]] if type(piece) is tuple else piece
        start += size
    return out


def _same_rows(cells: np.ndarray, others: np.ndarray, rows: np.ndarray | None = None) -> bool:
    """Whether each row of ``cells`` equals the row ``others`` names (of ``rows``, else of ``cells``),
    compared a slice at a time."""
    rows = cells if rows is None else rows
    step = 1 << 15
    return all((cells[k:k + step] == rows[others[k:k + step]]).all() for k in range(0, len(cells), step))


#: Rows per stretch of arithmetic done a stretch at a time (`_group`): a few arrays of it fit in the cache.
_CHUNK = 1 << 16


def _group(*keys: np.ndarray) -> np.ndarray:
    """One number per distinct tuple of ``keys`` (integer arrays of one length).

    The tuples are hashed to one 64-bit number each and numbered by those (`_numbered`); then every
    member of a group is checked against the group's first tuple, so two tuples sharing a hash are
    never taken for one (then the tuples themselves are sorted: slower, and exact)."""
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    count = len(keys[0])
    digest = np.zeros(count, dtype=np.uint64)
    scratch = np.empty(min(count, _CHUNK), dtype=np.uint64)
    for start in range(0, count, _CHUNK):  # a stretch at a time, in place: the arithmetic stays in the cache
        part, spare = digest[start:start + _CHUNK], scratch[:min(_CHUNK, count - start)]
        for k, key in enumerate(keys):
            spare[:] = key[start:start + _CHUNK]
            part ^= spare
            part *= np.uint64(0x9E3779B97F4A7C15)
            part += np.uint64(2 * k + 1)
            np.right_shift(part, np.uint64(29), out=spare)
            part ^= spare
    numbers = _numbered(digest)[1]
    del digest
    first = np.empty(int(numbers.max()) + 1, dtype=np.int64)
    first[numbers] = np.arange(len(numbers))  # one member of each group (the last)
    representative = first[numbers]
    if all((key == key[representative]).all() for key in keys):
        return numbers
    order = np.lexsort(keys[::-1])
    change = np.zeros(len(order), dtype=bool)
    change[0] = True
    for key in keys:
        ordered = key[order]
        change[1:] |= ordered[1:] != ordered[:-1]
    numbers = np.empty(len(order), dtype=np.int64)
    numbers[order] = np.cumsum(change) - 1
    return numbers


def _numbered(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of a 1-D uint64 array, without sorting it when it is
    long: the few distinct values are found through a table indexed by the values' top bits (one row
    of each slot kept, every row compared with its slot's), and only they are sorted.  Rows whose slot
    another value took are numbered by binary search among the distinct values."""
    count = len(values)
    if count < 1 << 10:
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1)
    bits = min(22, (2 * count - 1).bit_length())  # at least twice as many slots as rows, at most 16 MB of them
    row = np.int32 if count < (1 << 31) - 1 else np.int64
    slot = (values >> np.uint64(64 - bits)).astype(np.intp)
    table = np.zeros(1 << bits, dtype=row)
    table[slot] = np.arange(1, count + 1, dtype=row)  # one row of each slot (plus 1: 0 is an empty slot)
    held = table.take(slot)
    del table, slot
    held -= 1
    own = np.flatnonzero(held == np.arange(count, dtype=row))  # the rows kept: one per value, or fewer
    other = np.flatnonzero(values.take(held) != values)  # rows whose slot holds another value
    found = values.take(own)
    distinct = np.unique(np.concatenate([found, values.take(other)]) if len(other) else found)
    rank = np.empty(count, dtype=np.int64)
    rank[own] = np.searchsorted(distinct, found)
    inverse = rank.take(held)
    del rank, held
    if len(other):
        inverse[other] = np.searchsorted(distinct, values.take(other))
    return distinct, inverse


def _cells(raw: np.ndarray, at: np.ndarray, length: int) -> np.ndarray:
    """The ``length`` bytes at each of ``at`` in ``raw``, one row each, zeros after them to a multiple of
    8 bytes: the file's windows of that width copied (one copy, no padding joined on after), their last
    bytes cleared."""
    width = -(-length // 8) * 8
    if len(at) and int(at.max()) <= len(raw) - width:  # every window in the file (all but the last bytes)
        cells = _windows(raw, width)[at].view(np.uint8).reshape(len(at), width)
    else:
        cells = np.zeros((len(at), width), dtype=np.uint8)
        for k, start in enumerate(at.tolist()):
            cells[k, :length] = raw[start:start + length]
    cells[:, length:] = 0
    return cells


def _windows(raw: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at every offset of ``raw``, each one value (a view): indexed by offsets, each
    window is copied whole (as a 2-D view's rows, numpy would copy them a byte at a time)."""
    return np.ndarray((len(raw) - width + 1,), dtype=np.dtype((np.void, width)), buffer=raw, strides=(1,))
