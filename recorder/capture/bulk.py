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

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from formats.cluster_codecs import MESSAGES_BY_TEMPLATE_ID, SCHEMA_ID
from formats.cluster_codecs_ext import decode_cluster
from formats.errors import DecodeError
from formats.event_columns import EXTRA_LOG, EXTRA_PACKET, Entries, EventColumns
from formats.events import CHANNELS, DIRECTIONS
from formats.pcap import Packet, PacketColumns, _typed
from formats.udp import (
    DataFrame,
    PadFrame,
    SetupFrame,
    decode_datagram,
)
from recorder.capture.datagrams import MAX_EXAMPLES, DatagramDecoder, Keyed
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
        self._captures: dict[int, _Capture] = {}

    # --- feeding ----------------------------------------------------------------------------------
    def feed(self, columns: PacketColumns, *, capture: int, progress: Callable[[int], None] | None = None) -> None:
        """Every datagram of one capture, in packet order (times already filled in)."""
        state = _Capture(self, columns, capture)
        self._captures[capture] = state
        state.walk(progress)

    def finish(self) -> EventColumns:
        """The decoder's `finish_keyed`, then every event of every capture, sorted, as columns."""
        self.keyed += self.decoder.finish_keyed()
        keyed = self.keyed
        python = EventColumns.from_events([event for _, event in keyed], entries=self.entries)
        keys = [np.fromiter((key[k] for key, _ in keyed), np.int64, len(keyed)) for k in range(5)]
        parts, part_keys = [python], [keys]
        for state in self._captures.values():
            made = state.run_events()
            if made is not None:
                parts.append(made[0])
                part_keys.append(made[1])
        columns = EventColumns.concat_shared(parts) if len(parts) > 1 else python
        keys = [np.concatenate([k[i] for k in part_keys]) for i in range(5)]
        order = np.lexsort(keys[::-1])
        return columns.take(order)

    # --- asked by the decoder -----------------------------------------------------------------------
    def last_status(self, key: tuple, packet: int) -> int:
        """The packet number of the stream's last status message before ``packet`` (-1: none)."""
        state = self._captures.get(key[0])
        return state.last_status(key, packet) if state is not None else -1

    def drop_held(self, key: tuple, released: int, packet: int, down: int | None) -> int:
        """Runs' ``in`` events on this stream made after ``released`` and before ``packet`` were still
        held when the receiver asked for a SETUP: those that arrived after ``down`` are dropped."""
        state = self._captures.get(key[0])
        return state.drop_held(key, released, packet, down) if state is not None else 0

    def sends(self, member: tuple[int, int]) -> np.ndarray:
        """(packet, time) of what ``member`` sent in the status messages and runs decoded in bulk."""
        state = self._captures.get(member[0])
        return state.sends(member[1]) if state is not None else np.zeros((0, 2), np.int64)

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

    def __init__(self, bulk: BulkDecoder, columns: PacketColumns, capture: int) -> None:
        self.bulk = bulk
        self.decoder = bulk.decoder
        self.columns = columns
        self.capture = capture
        self.runs: list[tuple] = []  # (stream, first, end, sender, receiver, channel, base, sends_as)
        self.dropped: list[np.ndarray] = []  # candidate positions whose held ``in`` event was dropped
        self._sort(columns)

    # --- sorting the datagrams ----------------------------------------------------------------------
    def _sort(self, columns: PacketColumns) -> None:
        count = len(columns)
        data = columns.data
        offset = columns.payload_offset
        length = columns.payload_length.astype(np.int64)
        kind = np.full(count, _FED, dtype=np.int8)
        word = _typed(data, "<u8")
        # The first frame's header where the payload is in the file (a rebuilt IP datagram is fed).
        has = np.flatnonzero((offset >= 0) & (length >= 8))
        header = word[offset[has]]
        frame_length = (header & 0xFFFFFFFF).astype(np.int64)
        frame_length = np.where(frame_length >= 1 << 31, frame_length - (1 << 32), frame_length)
        version = (header >> 32) & 0xFF
        flags = (header >> 40) & 0xFF
        frame_type = header >> 48
        size = length[has]
        minimum = np.select([frame_type == 3, frame_type == 2, frame_type == 6], [36, 28, 40], 1 << 40)
        counted = (version == 0) & (minimum <= frame_length) & (frame_length <= size)
        status = counted & (frame_type == 3)
        regular = status & ((flags & 0x80) == 0)
        kind[has[counted & (frame_type != 3)]] = _COUNTED
        kind[has[regular]] = _STATUS
        self.counted = {"NAK": int(np.count_nonzero(counted & (frame_type == 2))),
                        "RTTM": int(np.count_nonzero(counted & (frame_type == 6))),
                        "SM": int(np.count_nonzero(regular))}
        # DATA frames alone in their datagram: a heartbeat, or a whole message.
        data_rows = has[~counted & (frame_type == 1) & (size >= 32) & (version == 0)]
        second = word[offset[data_rows] + 8]
        third = word[offset[data_rows] + 16]
        frame_length = frame_length[np.searchsorted(has, data_rows)]
        flags_of = flags[np.searchsorted(has, data_rows)]
        term_offset = _int32(second & 0xFFFFFFFF)
        aligned = (term_offset >= 0) & ((term_offset & 31) == 0)
        size = length[data_rows]
        heartbeat = aligned & (frame_length == 0) & (size == 32)
        padded = (frame_length + 31) & ~31
        message = (aligned & (frame_length >= 32) & (frame_length <= size) & (size <= padded)
                   & ((flags_of & 0xC0) == 0xC0))
        # A message's bytes, decoded once per distinct payload.
        message_rows = data_rows[message]
        entry = self._entries(data, offset[message_rows] + 32, frame_length[message] - 32)
        fed = np.array(self.bulk._entry_fed + [True], dtype=bool)[entry]  # -1 (undecodable) is fed too
        keep = ~fed
        message_rows, entry = message_rows[keep], entry[keep]
        kind[data_rows[heartbeat]] = _HEARTBEAT
        kind[message_rows] = _MESSAGE
        self.kind = kind
        # Candidates' fields, in packet order.
        rows = np.flatnonzero((kind == _HEARTBEAT) | (kind == _MESSAGE))
        where = np.searchsorted(data_rows, rows)
        self.c_session = _int32(second[where] >> 32)
        self.c_stream = _int32(third[where] & 0xFFFFFFFF)
        self.c_term = _int32(third[where] >> 32)
        self.c_offset = term_offset[where]
        self.c_length = frame_length[where]
        self.c_eos = (flags_of[where] & 0x20) != 0
        c_entry = np.full(len(rows), -1, dtype=np.int32)
        c_entry[np.searchsorted(rows, message_rows)] = entry
        # Status messages (regular, and those asking for a SETUP): their stream's key is reversed.
        status_rows = np.flatnonzero(kind == _STATUS)
        setup_rows = has[status & ~regular]
        all_status = np.union1d(status_rows, setup_rows)
        status_word = word[offset[all_status] + 8]
        # The datagrams fed one by one, and the streams each of them touches.
        fed_rows = np.flatnonzero(kind == _FED)
        touched: list[tuple[int, int, int, int, int, int, int]] = []  # (row, src, sport, dst, dport, session, stream)
        for row in fed_rows.tolist():
            touched.extend(self._streams_of(row))
        t = np.array(touched, dtype=np.int64).reshape(-1, 7)
        # One number per stream (source, destination, session, stream id), whichever way it was seen.
        src, sport, dst, dport = columns.src, columns.src_port, columns.dst, columns.dst_port
        keys_src = np.concatenate([src[rows], dst[all_status], t[:, 1]]).astype(np.int64)
        keys_sport = np.concatenate([sport[rows], dport[all_status], t[:, 2]]).astype(np.int64)
        keys_dst = np.concatenate([dst[rows], src[all_status], t[:, 3]]).astype(np.int64)
        keys_dport = np.concatenate([dport[rows], sport[all_status], t[:, 4]]).astype(np.int64)
        keys_session = np.concatenate([self.c_session, _int32(status_word & 0xFFFFFFFF), t[:, 5]])
        keys_stream = np.concatenate([self.c_stream, _int32(status_word >> 32), t[:, 6]])
        stream_of = _group(keys_src, keys_sport, keys_dst, keys_dport, keys_session, keys_stream)
        streams = int(stream_of.max()) + 1 if len(stream_of) else 0
        first = np.full(streams, -1, dtype=np.int64)
        first[stream_of[::-1]] = np.arange(len(stream_of))[::-1]  # a representative of each stream
        self.key_parts = [k[first] for k in (keys_src, keys_sport, keys_dst, keys_dport, keys_session, keys_stream)]
        self.stream_count = streams
        n_candidates, n_status = len(rows), len(all_status)
        c_stream_id = stream_of[:n_candidates]
        s_stream_id = stream_of[n_candidates:n_candidates + n_status]
        t_stream_id = stream_of[n_candidates + n_status:]
        # Candidates grouped by stream, each group in packet order.
        order = np.argsort(c_stream_id, kind="stable")
        self.c_row = rows[order]
        self.c_packet = columns.index[self.c_row]
        self.c_ts = columns.ts_ns[self.c_row]
        self.c_kind = kind[self.c_row]
        self.c_entry = c_entry[order]
        self.c_eos = self.c_eos[order] & (self.c_kind == _HEARTBEAT)
        for name in ("c_session", "c_stream", "c_term", "c_offset", "c_length"):
            setattr(self, name, getattr(self, name)[order])
        c_stream_id = c_stream_id[order]
        self.c_start = np.searchsorted(c_stream_id, np.arange(streams), side="left")
        self.c_end = np.searchsorted(c_stream_id, np.arange(streams), side="right")
        is_message = self.c_kind == _MESSAGE
        self.c_aligned = np.where(is_message, (self.c_length + 31) & ~31, 0)
        named = np.array(self.bulk._entry_named + [_NO_SENDER], dtype=np.int64)[self.c_entry]
        self.c_named = np.where(is_message, named, _NO_SENDER)
        # Where each candidate continues the one before it on its stream: the same term, at the offset
        # after it (a heartbeat is at the position it announces), naming the same sender if any.
        previous_end = self.c_offset + self.c_aligned
        same_stream = np.zeros(len(order), dtype=bool)
        same_stream[1:] = c_stream_id[1:] == c_stream_id[:-1]
        continues = np.zeros(len(order), dtype=bool)
        continues[1:] = (same_stream[1:] & (self.c_term[1:] == self.c_term[:-1])
                         & (self.c_offset[1:] == previous_end[:-1]))
        named_at = np.where(self.c_named != _NO_SENDER, np.arange(len(order)), -1)
        last_named = np.maximum.accumulate(named_at) if len(order) else named_at
        previous_named = np.full(len(order), -1, dtype=np.int64)
        previous_named[1:] = last_named[:-1]
        previous_named = np.where((previous_named >= 0) & (previous_named >= np.repeat(self.c_start, self.c_end - self.c_start)),
                                  previous_named, -1)
        renamed = (self.c_named != _NO_SENDER) & (previous_named >= 0) & (
            self.c_named != np.where(previous_named >= 0, self.c_named[np.maximum(previous_named, 0)], 0))
        message_at = np.where(is_message, np.arange(len(order)), -1)
        self.c_last_message = np.maximum.accumulate(message_at) if len(order) else message_at
        next_named = np.where(self.c_named != _NO_SENDER, np.arange(len(order)), len(order))
        self.c_next_named = np.minimum.accumulate(next_named[::-1])[::-1] if len(order) else next_named
        self.c_end_in_term = self.c_offset + self.c_length
        self.c_row_list = self.c_row.tolist()
        # The datagrams fed one by one that touch each stream: a run stops at the next of them, and each
        # makes its streams be checked again at their next candidate.
        big = len(columns) + 1
        candidate_key = c_stream_id * big + self.c_row
        fed_key = np.unique(t_stream_id * big + t[:, 0])
        fed_before = np.searchsorted(fed_key, candidate_key)  # fed datagrams of its stream before each candidate
        boundary = np.ones(len(order), dtype=bool)  # a run cannot go on from the candidate before this one
        boundary[1:] = ~same_stream[1:] | ~continues[1:] | renamed[1:] | (fed_before[1:] != fed_before[:-1])
        starts_at = np.append(np.flatnonzero(boundary), len(order))
        self.c_run_end = starts_at[np.searchsorted(starts_at, np.arange(len(order)), side="right")]
        after = np.searchsorted(candidate_key, fed_key, side="right")  # each fed datagram's next candidate
        fed_stream, fed_row = fed_key // big, fed_key % big
        here = (after < len(order)) & (c_stream_id[np.minimum(after, len(order) - 1)] == fed_stream)
        self._touched_index: dict[int, list[tuple[int, int]]] = {}
        for row, stream, position in zip(fed_row[here].tolist(), fed_stream[here].tolist(), after[here].tolist(),
                                         strict=True):
            self._touched_index.setdefault(row, []).append((stream, position))
        eos_at = np.where(self.c_eos, np.arange(len(order)), len(order))
        self.c_next_eos = np.minimum.accumulate(eos_at[::-1])[::-1] if len(order) else eos_at
        status_order = np.argsort(s_stream_id, kind="stable")
        status_sorted = s_stream_id[status_order]
        self.s_packet = columns.index[all_status[status_order]]
        self.s_start = np.searchsorted(status_sorted, np.arange(streams), side="left")
        self.s_end = np.searchsorted(status_sorted, np.arange(streams), side="right")
        # What members sent in their status messages.
        owner = self._owners(columns.src[all_status], columns.src_port[all_status])
        sent = owner >= 0
        self.status_sends = (owner[sent], columns.index[all_status[sent]], columns.ts_ns[all_status[sent]])
        self._stream_keys: dict[int, tuple] = {}
        self._stream_ids: dict[tuple, int] | None = None

    def _entries(self, data: memoryview, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The entry of each message (``lengths`` bytes at ``starts``): the messages are grouped by
        their bytes with array operations, and each distinct one is decoded once (`BulkDecoder.entry`)."""
        entry = np.empty(len(starts), dtype=np.int32)
        raw = np.frombuffer(data, dtype=np.uint8)
        for length in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths == length)
            if length == 0:
                entry[rows] = self.bulk.entry(b"")
                continue
            # One row of bytes per message, copied out of a view of the file as overlapping windows.
            windows = np.lib.stride_tricks.as_strided(raw, shape=(len(raw) - length + 1, length), strides=(1, 1),
                                                      writeable=False)
            cells = windows[starts[rows]]
            width = -(-length // 8) * 8
            if width != length:
                cells = np.concatenate([cells, np.zeros((len(rows), width - length), np.uint8)], axis=1)
            words = cells.view(np.uint64)
            digest = np.zeros(len(rows), dtype=np.uint64)
            for k in range(words.shape[1]):  # a multiplicative hash of the words (collisions checked below)
                digest = (digest ^ words[:, k]) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(k + 1)
            _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            if not (cells == cells[first[inverse]]).all():  # two payloads with one hash: tell them apart by bytes
                entry[rows] = [self.bulk.entry(cell.tobytes()[:length]) for cell in cells]
                continue
            numbers = np.array([self.bulk.entry(cells[k, :length].tobytes()) for k in first.tolist()], dtype=np.int32)
            entry[rows] = numbers[inverse]
        return entry

    def _streams_of(self, row: int) -> list[tuple]:
        """The streams a datagram fed one by one touches: its DATA, PAD and SETUP frames' streams, or
        for a status message the stream it reports on."""
        c = self.columns
        payload = c.payload(row)
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
        fed = np.flatnonzero(self.kind == _FED)
        packets = self._packets(fed)
        fed = fed.tolist()
        self._fed_count = 0
        self._pending = [-1] * self.stream_count
        self._states: list[Any] = [None] * self.stream_count
        heap: list[tuple[int, int, int]] = []
        self._heap = heap
        for stream in range(self.stream_count):
            self._schedule(stream, int(self.c_start[stream]))
        file_offset = c.file_offset
        done = 0
        steps = 0
        index = 0
        fed.append(1 << 62)
        touched = self._touched_index
        while True:
            next_fed = fed[index]
            if heap and heap[0][0] < next_fed:
                row, stream, position = heapq.heappop(heap)
                if self._pending[stream] != position:
                    continue  # replaced by an earlier check
                self._pending[stream] = -1
                self._check(stream, position)
            elif next_fed < 1 << 62:
                index += 1
                self._feed(packets[index - 1])
                for stream, position in touched.get(next_fed, ()):
                    self._schedule(stream, position)
            else:
                break
            steps += 1
            if progress is not None and steps % PROGRESS_EVERY == 0:
                at = int(file_offset[min(next_fed, len(c) - 1)]) if next_fed < 1 << 62 else done
                if at > done:
                    progress(at - done)
                    done = at
        decoder.datagrams += len(c) - self._fed_count
        if progress is not None:
            total = len(c.data)
            if total > done:
                progress(total - done)

    def _packets(self, rows: np.ndarray) -> list[Packet]:
        """The datagrams at ``rows``, as the decoder takes them (`formats.pcap.Packet`), made at once."""
        c = self.columns
        names = c.addresses
        offsets = c.payload_offset[rows].tolist()
        lengths = c.payload_length[rows].tolist()
        data = c.data
        out = []
        for row, index, ts, src, sport, dst, dport, offset, length, file_offset, interface, caplen, origlen in zip(
                rows.tolist(), c.index[rows].tolist(), c.ts_ns[rows].tolist(), c.src[rows].tolist(),
                c.src_port[rows].tolist(), c.dst[rows].tolist(), c.dst_port[rows].tolist(), offsets, lengths,
                c.file_offset[rows].tolist(), c.interface_id[rows].tolist(), c.caplen[rows].tolist(),
                c.origlen[rows].tolist(), strict=True):
            if offset < 0 or (c.huge_ts and row in c.huge_ts):
                out.append(c.packet(row))
                continue
            out.append(Packet(index, ts, names[src], sport, names[dst], dport, data[offset:offset + length],
                              file_offset, interface, caplen, origlen, offset))
        return out

    def _schedule(self, stream: int, position: int) -> None:
        """Check the stream at its candidate ``position`` (unless an earlier check is already due)."""
        if position >= self.c_end[stream]:
            return
        pending = self._pending[stream]
        if pending != -1 and pending <= position:
            return
        self._pending[stream] = position
        heapq.heappush(self._heap, (self.c_row_list[position], stream, position))

    def _feed(self, packet: Packet) -> None:
        self.bulk.keyed += self.decoder.feed_keyed(packet, packet.index, capture=self.capture,
                                                   payload_offset=packet.payload_offset)
        self._fed_count += 1

    def _feed_row(self, row: int) -> None:
        self._feed(self.columns.packet(row))

    def _stream_key(self, stream: int) -> tuple:
        key = self._stream_keys.get(stream)
        if key is None:
            src, sport, dst, dport, session, stream_id = (int(k[stream]) for k in self.key_parts)
            names = self.columns.addresses
            key = self._stream_keys[stream] = (self.capture, names[src], sport, names[dst], dport, session, stream_id)
        return key

    def _check(self, stream: int, position: int) -> None:
        """A candidate of ``stream``: the start of a run if the stream is steady, else fed one by one.
        A run goes on at most to the end of the stretch of candidates that each continue the one before
        (`c_run_end`: the stream's next datagram fed one by one, or the next that does not continue)."""
        state = self._states[stream]
        if state is None:
            state = self._states[stream] = self.decoder._streams.get(self._stream_key(stream))
        applied = 0
        if state is not None:
            end = int(self.c_run_end[position])
            if state.reassembler is None:
                applied = self._skip(stream, position, end)
            else:
                applied = self._run(state, stream, position, end)
        if not applied:
            self._feed_row(self.c_row_list[position])
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
                or state.join is not None or state.arrivals or state.unreceived
                or (sender is None and channel != "ingress")):
            return 0
        reassembler = state.reassembler
        if channel == "log" and not state.eos_seen and reassembler.end_of_stream and state.receiver is not None:
            return 0
        steady = reassembler.steady()
        if steady is None:
            return 0
        initial, shift, next_position, term_length, length_known = steady
        term = int(self.c_term[position])
        base = ((((term - initial + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000) << shift)
        if base + int(self.c_offset[position]) != next_position:
            return 0
        if not length_known:  # messages must lie within the assumed term (else it is corrected)
            beyond = np.flatnonzero((self.c_kind[position:end] == _MESSAGE)
                                    & (self.c_end_in_term[position:end] > term_length))
            if len(beyond):
                end = position + int(beyond[0])
        if channel == "consensus":
            named_at = int(self.c_next_named[position])
            if named_at < end and int(self.c_named[named_at]) != sender:
                end = named_at  # a message naming another sender: fed, for its problem
        ended = min(int(self.c_next_eos[position]), end)
        if ended < end and channel == "log" and not state.eos_seen and state.receiver is not None:
            end = ended  # the heartbeat that ends the log: fed, for its LogEndOfStream event
        if end <= position:
            return 0
        if ended < end:
            reassembler.end_of_stream = True
        last = end - 1
        last_message = int(self.c_last_message[last])
        if last_message >= position:
            next_position = base + int(self.c_offset[last_message]) + int(self.c_aligned[last_message])
            state.end_position = next_position
        highest = base + int(self.c_offset[last]) + int(self.c_aligned[last])
        reassembler.skip_ahead(next_position, highest)
        state.last_ts = int(self.c_ts[last])
        state.last_packet = int(self.c_packet[last])
        state.seen_data = True
        decoder.frames["DATA"] += end - position
        sends_as = sender if sender is not None else decoder.members.member_at_ip(self._stream_key(stream)[1])
        self.runs.append((stream, position, end, sender, state.receiver, channel, base, sends_as))
        return end - position

    # --- answers for the decoder --------------------------------------------------------------------
    def _stream_id(self, key: tuple) -> int | None:
        if self._stream_ids is None:
            self._stream_ids = {self._stream_key(stream): stream for stream in range(self.stream_count)}
        return self._stream_ids.get(key)

    def last_status(self, key: tuple, packet: int) -> int:
        stream = self._stream_id(key)
        if stream is None:
            return -1
        packets = self.s_packet[self.s_start[stream]:self.s_end[stream]]
        k = int(np.searchsorted(packets, packet, side="left"))
        return int(packets[k - 1]) if k else -1

    def drop_held(self, key: tuple, released: int, packet: int, down: int | None) -> int:
        stream = self._stream_id(key)
        if stream is None:
            return 0
        lost = 0
        for run_stream, first, end, _, _, channel, _, _ in self.runs:
            if run_stream != stream or channel not in ("consensus", "log", "ingress"):
                continue
            positions = np.arange(first, end)
            made = self.c_packet[positions]
            held = positions[(self.c_kind[positions] == _MESSAGE) & (made > released) & (made < packet)]
            if down is not None:
                held = held[self.c_ts[held] > down]
            if len(held):
                self.dropped.append(held)
                lost += len(held)
        return lost

    def sends(self, member: int) -> np.ndarray:
        owners, packets, times = self.status_sends
        pieces = [np.stack([packets[owners == member], times[owners == member]], axis=1)]
        for _, first, end, _, _, _, _, sends_as in self.runs:
            if sends_as == member:
                pieces.append(np.stack([self.c_packet[first:end], self.c_ts[first:end]], axis=1))
        return np.concatenate(pieces)

    # --- the runs' events ---------------------------------------------------------------------------
    def run_events(self) -> tuple[EventColumns, list[np.ndarray]] | None:
        """The events of every run, and their sort keys (ts, capture, packet, order, in/out)."""
        if not self.runs:
            return None
        runs = self.runs
        first = np.array([r[1] for r in runs], dtype=np.int64)
        end = np.array([r[2] for r in runs], dtype=np.int64)
        lengths = end - first
        run_of = np.repeat(np.arange(len(runs)), lengths)
        positions = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(first, lengths)
        messages = self.c_kind[positions] == _MESSAGE
        positions, run_of = positions[messages], run_of[messages]
        decoder = self.decoder
        channel_names = [r[5] for r in runs]
        channel = np.array([_CHANNEL[name] for name in channel_names], dtype=np.int8)[run_of]
        sender = np.array([_NO_SENDER if r[3] is None else r[3] for r in runs], dtype=np.int64)[run_of]
        receiver = np.array([_NO_SENDER if r[4] is None else r[4] for r in runs], dtype=np.int64)[run_of]
        base = np.array([r[6] for r in runs], dtype=np.int64)[run_of]
        entry = self.c_entry[positions]
        # Messages counted by channel and type, as `_on_item` counts them.
        types = self.bulk.entries.types
        pairs, counts = np.unique(channel.astype(np.int64) << 32 | entry.astype(np.int64), return_counts=True)
        for pair, count in zip(pairs.tolist(), counts.tolist(), strict=True):
            decoder._message_counts[CHANNELS[pair >> 32], types[pair & 0xFFFFFFFF]] += count
        has_out = np.isin(channel, [_CHANNEL["consensus"], _CHANNEL["log"], _CHANNEL["egress"]])
        has_in = np.isin(channel, [_CHANNEL["consensus"], _CHANNEL["log"], _CHANNEL["ingress"]])
        if self.dropped:
            has_in &= ~np.isin(positions, np.concatenate(self.dropped))
        is_log = channel == _CHANNEL["log"]
        peer_of_out = ~np.isin(channel, [_CHANNEL["egress"]])
        peer_of_in = ~np.isin(channel, [_CHANNEL["ingress"]])
        outs, ins = np.flatnonzero(has_out), np.flatnonzero(has_in)
        picks = np.concatenate([outs, ins])
        out_rows = len(outs)
        direction = np.concatenate([np.full(out_rows, _OUT, np.int8), np.full(len(ins), _IN, np.int8)])
        node = np.concatenate([sender[outs], receiver[ins]])
        peer = np.concatenate([receiver[outs], sender[ins]])
        has_peer = np.concatenate([peer_of_out[outs], peer_of_in[ins]])
        picked = positions[picks]
        ts = self.c_ts[picked]
        packet = self.c_packet[picked]
        log = is_log[picks]
        log_position = np.where(log, base[picks] + self.c_offset[picked] + self.c_aligned[picked], 0)
        count = len(picks)
        columns = EventColumns(
            ts=ts, node=node, dir=direction, peer=np.where(has_peer, peer, 0), has_peer=has_peer,
            channel=channel[picks], entry=entry[picks],
            extra_kind=np.where(log, EXTRA_LOG, EXTRA_PACKET).astype(np.int8), packet=packet,
            log_position=log_position, captured=np.zeros(count, dtype=bool), captured_ts=np.zeros(count, np.int64),
            extra_ref=np.full(count, -1, dtype=np.int32), entries=self.bulk.entries, others=[])
        keys = [ts, np.full(count, self.capture, np.int64), packet, np.zeros(count, np.int64),
                np.concatenate([np.zeros(out_rows, np.int64), np.ones(len(ins), np.int64)])]
        return columns, keys


def _int32(values: np.ndarray) -> np.ndarray:
    """Unsigned 32-bit values as Java's int (two's complement), in int64."""
    values = values.astype(np.int64) & 0xFFFFFFFF
    return np.where(values >= 1 << 31, values - (1 << 32), values)


def _group(*keys: np.ndarray) -> np.ndarray:
    """One number per distinct tuple of ``keys`` (int64 arrays of one length), numbered in sorted order:
    packed into one int64 key when their ranges allow it (numbering pairs of columns first if need be)."""
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    lows = [int(k.min()) for k in keys]
    widths = [max(1, (int(k.max()) - low).bit_length()) for k, low in zip(keys, lows, strict=True)]
    if sum(widths) <= 62:
        packed = np.zeros(len(keys[0]), dtype=np.int64)
        for key, low, width in zip(keys, lows, widths, strict=True):
            packed = (packed << width) | (key - low)
        return np.unique(packed, return_inverse=True)[1].reshape(-1)
    if len(keys) > 2:  # number the first half and the second half apart, then the pairs
        half = len(keys) // 2
        return _group(_group(*keys[:half]), _group(*keys[half:]))
    order = np.lexsort(keys[::-1])
    change = np.zeros(len(order), dtype=bool)
    change[0] = True
    for key in keys:
        ordered = key[order]
        change[1:] |= ordered[1:] != ordered[:-1]
    numbers = np.empty(len(order), dtype=np.int64)
    numbers[order] = np.cumsum(change) - 1
    return numbers
