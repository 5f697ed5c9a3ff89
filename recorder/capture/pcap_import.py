"""pcap and pcapng captures in: one or several files → datagrams → events (`datagrams.DatagramDecoder`).

Files are memory-mapped and read by `formats.pcap.PcapReader`, which keeps going past what it cannot
use: a file cut short (tcpdump killed) gives every whole packet before the cut, then a problem naming
the offset; non-UDP packets are counted.  Everything read is decoded; everything skipped is reported
with its file, packet number or byte offset, and why.

In bulk (the default): each capture is read as columns (`PcapReader.columns`) and its steady traffic
decoded as arrays (`recorder.capture.bulk`), the events kept as `formats.event_columns.EventColumns`.
A mapped file is read a stretch at a time and each stretch's pages are let go once read, and the C
heap's free memory is handed back between steps (`bulk.give_back_memory`), so that a large capture
is never held whole in memory on top of what is made of it.  ``bulk=False`` reads and feeds every
datagram one at a time: the same events, problems and notes (the reference the tests compare with).

Several captures of one incident (one per host) are decoded together: a first pass over each file
finds which members' hosts it was taken on (`members.local_members`: the member addresses present
in every member-to-member datagram of that capture), so that each member's events come from its own
host's capture.  Where that cannot tell captures apart (a two-member cluster: both hosts are in
every datagram), each message is taken once, from the first capture given that shows it, and a note
says so.  With no members string, a first pass over the consensus traffic infers one
(`members.infer_members`), with a warning.

`decode_captures` takes the captures' bytes (tests build them in memory); `import_pcaps` opens the
files.  A packet without a timestamp (pcapng Simple Packet Block) takes the previous packet's time.
"""

from __future__ import annotations

import functools
import mmap
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from formats.errors import DecodeError
from formats.event_columns import EventColumns
from formats.events import Event
from formats.pcap import PacketColumns, PcapReader, PortUnreachable
from formats.replay_file import gc_paused
from recorder.capture.bulk import BulkDecoder, give_back_memory
from recorder.capture.datagrams import (
    DEFAULT_STREAMS,
    ConsensusPublicationSeen,
    DatagramDecoder,
    DecodeSummary,
    Problem,
    Streams,
    survey_datagrams,
)
from recorder.capture.driver_stalls import DriverStallScanner
from recorder.capture.flow_control import FlowControlScanner
from recorder.capture.lifecycle import WireLiveness
from recorder.capture.members import MemberMap, infer_members, local_members

#: How often (in packets) the progress callback hears about bytes read.
PROGRESS_EVERY = 4096


@dataclass(slots=True)
class CaptureFile:
    """What one capture file held and what was read of it."""

    path: str
    format: str
    size: int
    packets: int = 0
    udp_packets: int = 0
    truncated: bool = False
    first_ts_ns: int | None = None
    last_ts_ns: int | None = None
    local_members: tuple[int, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "bytes": self.size,
            "packets": self.packets,
            "udpPackets": self.udp_packets,
            "truncated": self.truncated,
            "firstTs": self.first_ts_ns,
            "lastTs": self.last_ts_ns,
            "localMembers": list(self.local_members),
            "skipped": dict(sorted(self.skipped.items())),
        }


class PcapImport:
    """The events of some captures (as columns, and as `Event`s on first use), what was read, and what
    each member sent and what was sent to it in vain (``liveness``, for `recorder.capture.lifecycle`).

    The decoder's findings about the members' publications go with them (`recorder.capture.publications`):
    ``consensus_publications`` (each consensus publication and its receiver's status messages),
    ``log_publications`` ((leader, log session id) -> when its log publication was first seen) and
    ``log_images`` ((member, log session id) -> when its driver had an image of it)."""

    __slots__ = ("columns", "files", "members", "summary", "problems", "notes", "liveness", "consensus_publications",
                 "log_publications", "log_images", "driver_stalls", "_events")

    def __init__(self, columns: EventColumns, files: list[CaptureFile], members: MemberMap, summary: DecodeSummary,
                 problems: list[Problem], notes: list[str], liveness: dict[int, WireLiveness] | None = None,
                 consensus_publications: list[ConsensusPublicationSeen] | None = None,
                 log_publications: dict[tuple[int, int], int] | None = None,
                 log_images: dict[tuple[int, int], list[int]] | None = None,
                 driver_stalls: dict[int, list[tuple[int, int]]] | None = None) -> None:
        self.columns = columns
        self.files = files
        self.members = members
        self.summary = summary
        self.problems = problems
        self.notes = notes
        self.liveness = liveness if liveness is not None else {}
        self.consensus_publications = consensus_publications if consensus_publications is not None else []
        self.log_publications = log_publications if log_publications is not None else {}
        self.log_images = log_images if log_images is not None else {}
        #: member → the spans its media driver read nothing (`recorder.capture.driver_stalls`)
        self.driver_stalls = driver_stalls if driver_stalls is not None else {}
        self._events: list[Event] | None = None

    @property
    def events(self) -> list[Event]:
        if self._events is None:
            self._events = self.columns.to_events()
        return self._events

    @property
    def first_ts_ns(self) -> int | None:
        times = [f.first_ts_ns for f in self.files if f.first_ts_ns is not None]
        return min(times) if times else None

    @property
    def last_ts_ns(self) -> int | None:
        times = [f.last_ts_ns for f in self.files if f.last_ts_ns is not None]
        return max(times) if times else None

    def end_of(self, member: int) -> int | None:
        """When the capture of ``member``'s host ended (else when the last capture ended)."""
        own = [f.last_ts_ns for f in self.files if member in f.local_members and f.last_ts_ns is not None]
        return max(own) if own else self.last_ts_ns


class _Timestamps:
    """Fills in packets without a timestamp with the previous packet's."""

    def __init__(self, packets) -> None:
        self._packets = packets
        self.missing = 0

    def __iter__(self):
        last = 0
        for packet in self._packets:
            if packet.ts_ns is None:
                self.missing += 1
                packet = packet._replace(ts_ns=last)
            else:
                last = packet.ts_ns
            yield packet


def decode_captures(
    captures: Sequence[tuple[str, bytes | bytearray | memoryview]],
    members: MemberMap | None = None,
    *,
    streams: Streams = DEFAULT_STREAMS,
    progress: Callable[[int], None] | None = None,
    bulk: bool = True,
) -> PcapImport:
    """Decode captures given as (name, bytes).  Raises DecodeError only when nothing can be read.

    ``bulk`` (the default) reads each capture as columns and decodes its steady traffic in bulk
    (`recorder.capture.bulk`); without it every datagram is read and fed to the decoder one at a
    time.  Both give the same events, problems and notes (the tests compare them).
    """
    with gc_paused():  # hundreds of thousands of events, rows and frames, and no cycles among them
        if bulk:
            return _decode_in_bulk(captures, members, streams=streams, progress=progress)
        return _decode_captures(captures, members, streams=streams, progress=progress)


def _decode_in_bulk(
    captures: Sequence[tuple[str, bytes | bytearray | memoryview]],
    members: MemberMap | None,
    *,
    streams: Streams,
    progress: Callable[[int], None] | None,
) -> PcapImport:
    readers = [(name, PcapReader(data, source=name), len(data)) for name, data in captures]
    tables = []
    for (_, reader, _), (_, data) in zip(readers, captures, strict=True):
        tables.append(reader.columns(read=lambda start, end, data=data: _read_through(data, start, end)))
    give_back_memory()  # the record walk's arrays, freed
    missing = [_fill_times(table) for table in tables]
    notes: list[str] = []
    if members is None:
        members = _infer_members(readers, [t.packets() for t in tables], notes)
    files = [CaptureFile(name, reader.format, size) for name, reader, size in readers]
    local = _local_members(members, tables, files, notes) if len(readers) > 1 else None
    decoder = DatagramDecoder(members, streams=streams, local_members=local,
                              sources={i: name for i, (name, _, _) in enumerate(readers)})
    feeder = BulkDecoder(decoder)
    flow = FlowControlScanner(members, streams.consensus)
    busy = DriverStallScanner(members, streams.log)
    problems: list[Problem] = []
    unreachable: list[PortUnreachable] = []
    for index, (name, reader, _) in enumerate(readers):
        file = files[index]
        table = tables[index]
        if len(table):
            file.first_ts_ns, file.last_ts_ns = table.time(0), table.time(len(table) - 1)
        # Each pass over the file's bytes lets their pages go behind it (`_read_through`): the next reads
        # them back a stretch at a time, and the whole capture is never resident at once.
        done = functools.partial(_read_through, captures[index][1])
        flow.feed_columns(table, capture=index, read=done)
        busy.feed_columns(table, capture=index, read=done)
        del table
        # Handed over, not kept here: the walk lets the capture's columns go as soon as it can.
        feeder.feed(tables.pop(index), capture=index, progress=progress,
                    read=lambda start, end, data=captures[index][1]: _read_through(data, start, end))
        tables.insert(index, None)
        file.packets = reader.packet_count
        file.udp_packets = reader.udp_count
        unreachable += reader.unreachable
        file.truncated = reader.truncated
        file.skipped = dict(reader.skipped)
        if missing[index]:
            notes.append(f"{name}: {missing[index]} packet(s) carry no timestamp (pcapng Simple Packet Blocks):"
                         " each takes the previous packet's time")
        for error in reader.problems:
            problems.append(Problem("capture file", error.expected, name, None, error.offset))
    columns = feeder.finish()
    give_back_memory()
    problems += decoder.problems
    return _imported(columns, files, members, decoder, problems, notes + decoder.notes, unreachable, flow, busy)


def _read_through(data: bytes | bytearray | memoryview, start: int = 0, end: int | None = None) -> None:
    """A pass over the capture's bytes [start, end) is done: a memory-mapped file's pages there leave this
    process's resident memory (read back from the page cache by the next pass that looks), so that a
    large capture is not held whole in memory on top of what is made of it."""
    source = data.obj if isinstance(data, memoryview) else None
    if not isinstance(source, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    end = len(source) if end is None else end
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages only: the edges may hold the next records
    last = end if end >= len(source) else end // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        source.madvise(mmap.MADV_DONTNEED, first, last - first)


def _imported(columns: EventColumns, files: list[CaptureFile], members: MemberMap, decoder: DatagramDecoder,
              problems: list[Problem], notes: list[str], unreachable: Sequence[PortUnreachable],
              flow: FlowControlScanner | None = None, busy: DriverStallScanner | None = None) -> PcapImport:
    if not len(columns):
        names = ", ".join(f.path for f in files)
        udp = sum(f.udp_packets for f in files)
        seen = "; ".join(f"{count} {category}" for category, count in sorted(decoder.skipped.items())) or "nothing"
        raise DecodeError(
            f"no Aeron cluster messages found for the members {members.text!r} ({udp} UDP packet(s); skipped: {seen})",
            source=names,
        )
    return PcapImport(columns, files, members, DecodeSummary.of(decoder), problems, notes,
                      _liveness(decoder, members, unreachable), _with_stalls(decoder.consensus_publications(), flow),
                      decoder.log_publications(), decoder.log_images(),
                      busy.stalls(decoder.publication_senders()) if busy is not None else {})


def _with_stalls(publications: list[ConsensusPublicationSeen], flow: FlowControlScanner | None
                 ) -> list[ConsensusPublicationSeen]:
    """Each consensus publication with the spans its sender sat at its receiver's flow-control limit."""
    stalls = flow.stalls() if flow is not None else {}
    if not stalls:
        return publications
    return [p._replace(stalls=tuple(stalls.get((p.receiver, _signed(p.session_id)), ()))) for p in publications]


def _signed(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def _fill_times(table: PacketColumns) -> int:
    """Packets without a time take the previous packet's (0 for the first); how many had none."""
    if table.has_ts is None:
        return 0
    missing = int(np.count_nonzero(~table.has_ts))
    if table.huge_ts:  # a time beyond int64 before one to fill in: done one by one, as it was read
        last = 0
        for row in range(len(table)):
            value = table.time(row)
            if value is None:
                if not -(1 << 63) <= last < 1 << 63:
                    table.huge_ts[row] = last
                else:
                    table.ts_ns[row] = last
            else:
                last = value
    else:
        rows = np.where(table.has_ts, np.arange(len(table)), -1)
        last = np.maximum.accumulate(rows) if len(rows) else rows
        table.ts_ns = np.where(last >= 0, table.ts_ns[np.maximum(last, 0)], 0)
    table.has_ts = None
    return missing


def _infer_members(readers: list, packets: list, notes: list[str]) -> MemberMap:
    survey = survey_datagrams(p for one in packets for p in one)
    members, warnings = infer_members(survey)
    notes += warnings
    if members is None:
        # A file that ended in a corrupt header says so first: that is why nothing was found.
        for _, reader, _ in readers:
            if reader.truncated and reader.problems:
                last = reader.problems[-1]
                raise DecodeError(f"{last.expected}; no Aeron consensus traffic before it", source=last.source,
                                  offset=last.offset)
        names = ", ".join(name for name, _, _ in readers)
        raise DecodeError(f"no Aeron cluster consensus traffic found ({warnings[0]}); give --members", source=names)
    return members


def _local_members(members: MemberMap, tables: list[PacketColumns], files: list[CaptureFile],
                   notes: list[str]) -> dict[int, frozenset[int]]:
    """Which members' hosts each capture was taken on (`members.local_members`), and notes saying so."""
    local = {}
    for index, table in enumerate(tables):
        names = table.addresses
        endpoints = np.concatenate([table.src.astype(np.int64) << 16 | table.src_port,
                                    table.dst.astype(np.int64) << 16 | table.dst_port])
        distinct, inverse = np.unique(endpoints, return_inverse=True)
        known = np.array([members.lookup(names[e >> 16], e & 0xFFFF) is not None for e in distinct.tolist()],
                         dtype=bool)[inverse.reshape(-1)] if len(distinct) else np.zeros(0, dtype=bool)
        count = len(table)
        involved = known[:count] | known[count:]
        total = int(np.count_nonzero(involved))
        counts: Counter[str] = Counter()
        src, dst = table.src[involved], table.dst[involved]
        for address, times in zip(*np.unique(np.concatenate([src, dst[dst != src]]), return_counts=True), strict=True):
            counts[names[int(address)]] += int(times)
        local[index] = local_members(members, counts, total)
        files[index].local_members = tuple(sorted(local[index]))
    _note_local_members(files, notes)
    return local


def _decode_captures(
    captures: Sequence[tuple[str, bytes | bytearray | memoryview]],
    members: MemberMap | None,
    *,
    streams: Streams,
    progress: Callable[[int], None] | None,
) -> PcapImport:
    """Every datagram read and fed to the decoder one at a time (`decode_captures` without ``bulk``)."""
    readers = [(name, PcapReader(data, source=name), len(data)) for name, data in captures]
    notes: list[str] = []
    if members is None:
        members = _infer_members(readers, [_Timestamps(reader.packets()) for _, reader, _ in readers], notes)
    local: dict[int, frozenset[int]] | None = None
    files = [CaptureFile(name, reader.format, size) for name, reader, size in readers]
    if len(readers) > 1:
        local = {}
        for index, (_, reader, _) in enumerate(readers):
            counts: Counter[str] = Counter()
            total = 0
            for packet in reader.packets():
                if members.lookup(packet.dst_ip, packet.dst_port) or members.lookup(packet.src_ip, packet.src_port):
                    total += 1
                    counts[packet.src_ip] += 1
                    if packet.dst_ip != packet.src_ip:
                        counts[packet.dst_ip] += 1
            local[index] = local_members(members, counts, total)
            files[index].local_members = tuple(sorted(local[index]))
        _note_local_members(files, notes)
    decoder = DatagramDecoder(members, streams=streams, local_members=local,
                              sources={i: name for i, (name, _, _) in enumerate(readers)})
    keyed: list[tuple[tuple, Event]] = []
    problems: list[Problem] = []
    unreachable: list[PortUnreachable] = []
    flow = FlowControlScanner(members, streams.consensus)
    busy = DriverStallScanner(members, streams.log)
    for index, (name, reader, size) in enumerate(readers):
        file = files[index]
        feed = decoder.feed_keyed
        done = 0
        # Classic pcap records always carry a time: only pcapng needs the filling wrapper.
        stamped = _Timestamps(reader.packets()) if reader.format != "pcap" else None
        first_ts = packet = None
        for count, packet in enumerate(stamped if stamped is not None else reader.packets(), 1):
            if first_ts is None:
                first_ts = packet.ts_ns
            keyed += feed(packet, packet.index, capture=index, payload_offset=packet.payload_offset)
            if packet.ts_ns is not None:
                flow.feed(packet.ts_ns, (packet.src_ip, packet.src_port), (packet.dst_ip, packet.dst_port), packet.payload,
                          capture=index)
                busy.feed(packet.ts_ns, (packet.src_ip, packet.src_port), (packet.dst_ip, packet.dst_port), packet.payload,
                          capture=index)
            if progress is not None and count % PROGRESS_EVERY == 0:
                progress(packet.file_offset - done)
                done = packet.file_offset
        if packet is not None:
            file.first_ts_ns, file.last_ts_ns = first_ts, packet.ts_ns
        if progress is not None:
            progress(size - done)
        file.packets = reader.packet_count
        file.udp_packets = reader.udp_count
        unreachable += reader.unreachable
        file.truncated = reader.truncated
        file.skipped = dict(reader.skipped)
        if stamped is not None and stamped.missing:
            notes.append(f"{name}: {stamped.missing} packet(s) carry no timestamp (pcapng Simple Packet Blocks):"
                         " each takes the previous packet's time")
        for error in reader.problems:
            problems.append(Problem("capture file", error.expected, name, None, error.offset))
    keyed += decoder.finish_keyed()
    keyed.sort(key=itemgetter(0))
    problems += decoder.problems
    notes += decoder.notes
    return _imported(EventColumns.from_events(map(itemgetter(1), keyed)), files, members, decoder, problems, notes,
                     unreachable, flow, busy)


def _liveness(decoder: DatagramDecoder, members: MemberMap, unreachable: Sequence[PortUnreachable]
              ) -> dict[int, WireLiveness]:
    """Per member: its spans of activity, the ICMP port unreachable answers to datagrams sent to its
    consensus endpoint, its SETUP requests from there and its consensus publications."""
    # Only the consensus endpoint counts: a consensus module keeps it bound as long as it lives, while
    # its log and catch-up endpoints and its publications come and go with its role.
    dead: dict[int, list[int]] = {}
    for answer in unreachable:
        owner = members.lookup(answer.dst_ip, answer.dst_port)
        if answer.ts_ns is not None and owner is not None and owner[1] == "consensus":
            dead.setdefault(owner[0], []).append(answer.ts_ns)
    heard, asked = decoder.heard(), decoder.setup_requests()
    # Only consensus publications: a consensus module makes them when it starts (a leader's new log
    # publication or a catch-up replay is no sign of a new process).
    publications = {member: [p for p in own if p[2] == decoder.streams.consensus]
                    for member, own in decoder.publications().items()}
    return {member: WireLiveness(tuple(heard.get(member, ())), tuple(sorted(dead.get(member, ()))),
                                 tuple(asked.get(member, ())), tuple(publications.get(member, ())))
            for member in sorted(set(heard) | set(dead))}


def import_pcaps(
    paths: Sequence[str | os.PathLike[str]],
    members: MemberMap | None = None,
    *,
    streams: Streams = DEFAULT_STREAMS,
    progress: Callable[[int], None] | None = None,
    extra: Sequence[tuple[str, bytes | bytearray | memoryview]] = (),
    bulk: bool = True,
) -> PcapImport:
    """Memory-map each capture file and decode them together, with ``extra`` captures already in
    memory (a `recount record` recording turned into pcap bytes).

    The maps are left to the garbage collector rather than closed here: views of them may still be
    referenced (by an exception's traceback, say), and an mmap with live views cannot be closed.
    """
    captures = []
    for path in paths:
        name = os.fspath(path)
        with open(name, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size == 0:
                raise DecodeError("empty file: expected a pcap or pcapng capture", source=name, offset=0)
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        captures.append((name, memoryview(mapped)))
    captures.extend(extra)
    return decode_captures(captures, members, streams=streams, progress=progress, bulk=bulk)


PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


def sniff_capture(head: bytes) -> str | None:
    """"pcap", "pcapng" or None from a file's first bytes."""
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == PCAPNG_MAGIC:
        return "pcapng"
    return None


def _note_local_members(files: list, notes: list[str]) -> None:
    """Say which members each capture was taken beside, and which look local to several."""
    for file in files:
        where = ", ".join(map(str, file.local_members)) or "none (a capture between hosts)"
        notes.append(f"{file.path}: taken on the host of member(s) {where}")
    shared = sorted({m for i, f in enumerate(files) for m in f.local_members
                     if any(m in g.local_members for g in files[i + 1 :])})
    if shared:
        first = next(f.path for f in files if shared[0] in f.local_members)
        notes.append(
            f"member(s) {', '.join(map(str, shared))} look local to several captures (every datagram of each"
            f" involves them, as with two members): each message is taken once, from the first capture that"
            f" shows it ({first} first)"
        )
