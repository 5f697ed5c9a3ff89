"""Packet captures: read UDP datagrams out of pcap and pcapng bytes; write classic pcap bytes.

Reading (`PcapReader`) takes the whole capture as bytes, a bytearray or a memoryview (callers open
or mmap the file) and yields one `Packet` per UDP datagram, its payload a zero-copy memoryview into
the capture wherever possible.  Those views (and the reader) pin the buffer: an mmap cannot be
closed while they live, so copy with ``bytes()`` whatever must outlive the file.

* Classic pcap: both byte orders, microsecond (a1b2c3d4) and nanosecond (a1b23c4d) magic.
* pcapng: sections in either byte order, several interfaces each with its own link type and
  ``if_tsresol`` (power of 10 or of 2) and ``if_tsoffset``; Enhanced, Simple and obsolete Packet
  Blocks; every other block (name resolution, statistics, custom, decryption secrets, unknown) is
  skipped.  Simple Packet Blocks carry no timestamp: their packets have ``ts_ns`` None.
* Link types: Ethernet (1, with 802.1Q/802.1ad VLAN tags), Linux cooked SLL (113) and SLL2 (276),
  BSD loopback NULL (0) and OpenBSD LOOP (108), raw IP (101, 228 IPv4, 229 IPv6).
* IPv4 with options, IPv6 with extension headers.  Fragmented IP datagrams are reassembled; the
  packet is yielded when its last fragment arrives (that fragment's index and time), and fragments
  that never complete are reported.

Packet numbers (``Packet.index``) count every packet record in the file from 1, UDP or not, as
Wireshark's ``frame.number`` does, so a user can find the same packet in Wireshark.

`PcapReader.columns` reads the same datagrams as `PacketColumns` (numpy arrays, one row per
datagram): records in the common layout (IPv4 without options or fragments, UDP, over Ethernet,
SLL, SLL2, NULL, LOOP or raw IP) a stretch of the file at a time with array operations, anything
else through the same per-packet code as `packets`, with the same problems in the same order.

Bad input never stops the reading of what is good.  `PcapReader.packets()` yields every complete
UDP datagram; what it could not use goes to ``reader.problems`` (`DecodeError`s naming the file,
the byte offset and the packet number) and ``reader.skipped`` (counts by reason, e.g. non-UDP
traffic).  A file cut short (tcpdump killed mid-record) or a corrupt block header ends the reading:
``reader.truncated`` is then set and the last problem says where.  `iter_packets` is the strict
form: the same packets, then the first problem raised as `DecodeError`.

ICMP "port unreachable" (IPv4 type 3 code 3, ICMPv6 type 1 code 4) quoting a UDP datagram is kept
as evidence rather than counted as skipped: the host had no socket on that port, so whatever listens
there was not running.  Each becomes a `PortUnreachable` in ``reader.unreachable`` (the *quoted*
datagram's addresses, and the ICMP packet's number and time); ``reader.skipped`` counts them under
"ICMP port unreachable (kept as evidence)".

Note for importers: a capture on Linux's ``any`` device sees each loopback packet twice (sent and
received).  Duplicate Aeron DATA frames are harmless to `formats.reassembly`, which drops them.

Writing (`PcapWriter`) builds classic pcap bytes (nanosecond magic, Ethernet or raw IPv4 link) with
valid IPv4 and UDP checksums, which Wireshark and tshark open without complaint.

No I/O, no imports of ours beyond `formats.errors`.
"""

from __future__ import annotations

import socket
import struct
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from formats.errors import DecodeError

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
SUPPORTED_LINK_TYPES = frozenset(
    {
        LINKTYPE_NULL,
        LINKTYPE_ETHERNET,
        LINKTYPE_RAW,
        LINKTYPE_LOOP,
        LINKTYPE_LINUX_SLL,
        LINKTYPE_IPV4,
        LINKTYPE_IPV6,
        LINKTYPE_LINUX_SLL2,
    }
)

PCAP_MAGIC_MICROSECONDS = 0xA1B2C3D4
PCAP_MAGIC_NANOSECONDS = 0xA1B23C4D
PCAPNG_SECTION_HEADER = 0x0A0D0D0A
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
PCAPNG_INTERFACE_DESCRIPTION = 0x00000001
PCAPNG_OBSOLETE_PACKET = 0x00000002
PCAPNG_SIMPLE_PACKET = 0x00000003
PCAPNG_ENHANCED_PACKET = 0x00000006

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
_VLAN_ETHERTYPES = frozenset({0x8100, 0x88A8, 0x9100})
IP_PROTOCOL_UDP = 17
IP_PROTOCOL_ICMP = 1
IP_PROTOCOL_ICMPV6 = 58
_IPV6_EXTENSION_HEADERS = frozenset({0, 43, 60, 135, 139, 140, 253, 254})
_IPV6_FRAGMENT = 44
_IPV6_AUTHENTICATION = 51
_AF_INET = 2
_AF_INET6 = frozenset({10, 23, 24, 28, 30})

# Wireshark refuses records larger than this for ordinary link types; a bigger caplen means the
# record header is garbage, and reading on would swallow the records after it.
MAX_RECORD_LENGTH = 262144
#: `PcapReader.columns` reads a classic pcap a stretch of about this many bytes at a time.  (Not to be
#: changed lightly: the addresses are numbered in the order the stretches first show them, each
#: stretch's new ones in numeric order, so another size can number a damaged capture's addresses
#: differently.  1 MB was ~4 ms faster for 400k packets.)
SEGMENT_BYTES = 1 << 22
_MAX_PENDING_FRAGMENTED_DATAGRAMS = 1024

_U16BE = struct.Struct("!H")
_U32BE = struct.Struct("!I")
# Ethernet + IPv4 without options + UDP, the shape of nearly every packet in a cluster capture:
# ethertype, version/IHL, total length, flags/fragment offset, protocol, src, dst, ports, UDP length.
_ETHERNET_IPV4_UDP = struct.Struct("!12xHBxHxxHxB2x4s4sHHH2x")
_IPV4_UDP = struct.Struct("!BxHxxHxB2x4s4sHHH2x")
_IPV4 = struct.Struct("!BxHHHxB2x4s4s")
_IPV6 = struct.Struct("!4xHBx16s16s")
_UDP = struct.Struct("!HHH2x")


class Packet(NamedTuple):
    """One UDP datagram as captured.

    A NamedTuple, not a dataclass, because captures hold millions of these and tuple construction
    is several times cheaper; it is just as immutable.
    """

    index: int  #: 1-based number of the packet record in the file (Wireshark's frame.number)
    ts_ns: int | None  #: capture time in ns since the epoch; None for pcapng Simple Packet Blocks
    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int
    payload: memoryview | bytes  #: the UDP payload (bytes when reassembled from IP fragments)
    file_offset: int  #: where the packet's record or block starts in the file
    interface_id: int  #: pcapng interface (0 for classic pcap)
    caplen: int  #: bytes captured of the packet
    origlen: int  #: bytes the packet had on the wire
    payload_offset: int | None  #: file offset of the UDP payload; None when reassembled


class PortUnreachable(NamedTuple):
    """An ICMP port unreachable: the datagram it quotes could not be delivered (no socket on its port)."""

    index: int  #: the ICMP packet's number in the file
    ts_ns: int | None
    src_ip: str  #: of the quoted datagram: who sent it
    src_port: int
    dst_ip: str  #: where it could not be delivered
    dst_port: int


UNREACHABLE = "ICMP port unreachable (kept as evidence)"


@dataclass(frozen=True, slots=True)
class Interface:
    """A capture interface: its link type and how its timestamps convert to nanoseconds."""

    link_type: int
    snaplen: int
    ts_multiplier: int = 1000  # ns = ts * multiplier // divisor + offset_ns
    ts_divisor: int = 1
    ts_offset_ns: int = 0


@dataclass
class _Fragments:
    pieces: dict[int, bytes] = field(default_factory=dict)
    total: int | None = None
    first_index: int = 0
    first_offset: int = 0


class PacketColumns:
    """The UDP datagrams of a capture as arrays, row by row in file order (`PcapReader.columns`).

    One row per datagram, as `PcapReader.packets` yields them: ``index``, ``ts_ns``, ``src`` and
    ``dst`` (numbers into ``addresses``), ``src_port``, ``dst_port``, where the payload is
    (``payload_offset`` into ``data`` and ``payload_length``; -1 and ``loose[row]`` for a datagram
    rebuilt from IP fragments), ``file_offset``, ``interface_id``, ``caplen`` and ``origlen``.
    ``has_ts`` is None when every packet has a time, else False where it has none (pcapng Simple
    Packet Blocks; ``ts_ns`` is 0 there).  A time beyond int64 nanoseconds (a damaged pcapng) is in
    ``huge_ts[row]`` (``ts_ns`` 0).  `packet` gives one row as the `Packet` `packets` yields.
    """

    __slots__ = ("index", "ts_ns", "src", "src_port", "dst", "dst_port", "payload_offset", "payload_length",
                 "file_offset", "interface_id", "caplen", "origlen", "has_ts", "addresses", "data", "loose",
                 "huge_ts")

    def __init__(self, *, index, ts_ns, src, src_port, dst, dst_port, payload_offset, payload_length, file_offset,
                 interface_id, caplen, origlen, has_ts, addresses: list[str], data: memoryview,
                 loose: dict[int, bytes] | None = None, huge_ts: dict[int, int] | None = None) -> None:
        self.index, self.ts_ns = index, ts_ns
        self.src, self.src_port, self.dst, self.dst_port = src, src_port, dst, dst_port
        self.payload_offset, self.payload_length = payload_offset, payload_length
        self.file_offset, self.interface_id, self.caplen, self.origlen = file_offset, interface_id, caplen, origlen
        self.has_ts = has_ts
        self.addresses = addresses
        self.data = data
        self.loose = loose if loose is not None else {}
        self.huge_ts = huge_ts if huge_ts is not None else {}

    def time(self, row: int) -> int | None:
        if self.has_ts is not None and not self.has_ts[row]:
            return None
        return self.huge_ts[row] if self.huge_ts and row in self.huge_ts else int(self.ts_ns[row])

    def __len__(self) -> int:
        return len(self.index)

    def payload(self, row: int) -> memoryview | bytes:
        offset = int(self.payload_offset[row])
        if offset < 0:
            return self.loose[row]
        return self.data[offset : offset + int(self.payload_length[row])]

    def packet(self, row: int) -> Packet:
        offset = int(self.payload_offset[row])
        return Packet(
            int(self.index[row]),
            self.time(row),
            self.addresses[self.src[row]],
            int(self.src_port[row]),
            self.addresses[self.dst[row]],
            int(self.dst_port[row]),
            self.payload(row),
            int(self.file_offset[row]),
            int(self.interface_id[row]),
            int(self.caplen[row]),
            int(self.origlen[row]),
            None if offset < 0 else offset,
        )

    def packets(self) -> Iterator[Packet]:
        for row in range(len(self.index)):
            yield self.packet(row)

    @classmethod
    def joined(cls, parts: list[PacketColumns], addresses: list[str], data: memoryview) -> PacketColumns:
        """Stretches of one capture read one after the other, as one set of columns."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return cls(index=empty, ts_ns=empty, src=empty, src_port=empty, dst=empty, dst_port=empty,
                       payload_offset=empty, payload_length=empty, file_offset=empty, interface_id=empty, caplen=empty,
                       origlen=empty, has_ts=None, addresses=addresses, data=data)
        names = ("index", "ts_ns", "src", "src_port", "dst", "dst_port", "payload_offset", "payload_length",
                 "file_offset", "interface_id", "caplen", "origlen")
        arrays = {name: np.concatenate([getattr(part, name) for part in parts]) for name in names}
        has_ts = None
        if any(part.has_ts is not None for part in parts):
            has_ts = np.concatenate([part.has_ts if part.has_ts is not None else np.ones(len(part), dtype=bool)
                                     for part in parts])
        return cls(**arrays, has_ts=has_ts, addresses=addresses, data=data)

    def with_packets(self, packets: list[Packet], names: _AddressBook) -> PacketColumns:
        """These rows and ``packets`` (read one at a time), together in file order."""
        count = len(packets)
        extra = {
            "index": np.fromiter((p.index for p in packets), np.int64, count),
            "ts_ns": np.fromiter((p.ts_ns if p.ts_ns is not None and _INT64_MIN <= p.ts_ns <= _INT64_MAX else 0
                                  for p in packets), np.int64, count),
            "src": np.fromiter((names.id(p.src_ip) for p in packets), np.int32, count),
            "src_port": np.fromiter((p.src_port for p in packets), np.int32, count),
            "dst": np.fromiter((names.id(p.dst_ip) for p in packets), np.int32, count),
            "dst_port": np.fromiter((p.dst_port for p in packets), np.int32, count),
            "payload_offset": np.fromiter((-1 if p.payload_offset is None else p.payload_offset for p in packets),
                                          np.int64, count),
            "payload_length": np.fromiter((len(p.payload) for p in packets), np.int32, count),
            "file_offset": np.fromiter((p.file_offset for p in packets), np.int64, count),
            "interface_id": np.fromiter((p.interface_id for p in packets), np.int64, count),
            "caplen": np.fromiter((p.caplen for p in packets), np.int64, count),
            "origlen": np.fromiter((p.origlen for p in packets), np.int64, count),
        }
        order = np.argsort(np.concatenate([self.index, extra["index"]]), kind="stable")
        merged = {name: np.concatenate([getattr(self, name), values])[order] for name, values in extra.items()}
        missing = [p.ts_ns is None for p in packets]
        has_ts = None
        if self.has_ts is not None or any(missing):
            mine = self.has_ts if self.has_ts is not None else np.ones(len(self.index), dtype=bool)
            has_ts = np.concatenate([mine, ~np.array(missing, dtype=bool)])[order]
        where = np.empty(len(order), dtype=np.int64)
        where[order] = np.arange(len(order))
        first = len(self.index)
        loose = {int(where[first + k]): bytes(p.payload) for k, p in enumerate(packets) if p.payload_offset is None}
        loose.update({int(where[row]): payload for row, payload in self.loose.items()})
        huge = {int(where[first + k]): p.ts_ns for k, p in enumerate(packets)
                if p.ts_ns is not None and not _INT64_MIN <= p.ts_ns <= _INT64_MAX}
        huge.update({int(where[row]): ts for row, ts in self.huge_ts.items()})
        return PacketColumns(**merged, has_ts=has_ts, addresses=names.names, data=self.data, loose=loose,
                             huge_ts=huge)


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class _AddressBook:
    """IP addresses as numbers into one list of their text forms."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._ids: dict[str, int] = {}
        self._known = np.zeros(0, dtype=np.uint64)  # IPv4 addresses seen, sorted
        self._known_ids = np.zeros(0, dtype=np.int32)
        # ``_known`` and after it a number no IPv4 address is: where `np.searchsorted` puts an address, the
        # address found there or not (no bounds to check).
        self._ends = np.array([1 << 32], dtype=np.uint64)

    def id(self, name: str) -> int:
        number = self._ids.get(name)
        if number is None:
            number = self._ids[name] = len(self.names)
            self.names.append(name)
        return number

    def ipv4_ids(self, addresses: np.ndarray) -> np.ndarray:
        """The numbers of IPv4 addresses (as integers): a capture has a handful, looked up by binary search."""
        if not len(addresses):
            return np.zeros(0, dtype=np.int32)
        addresses = addresses.astype(np.uint64)
        place = np.searchsorted(self._known, addresses)
        hit = self._ends[place] == addresses
        if not hit.all():
            for address in np.unique(addresses[~hit]).tolist():
                number = self.id(_ipv4_name(int(address).to_bytes(4, "big")))
                at = int(np.searchsorted(self._known, address))
                self._known = np.insert(self._known, at, np.uint64(address))
                self._known_ids = np.insert(self._known_ids, at, number)
            self._ends = np.append(self._known, np.uint64(1 << 32))
            place = np.searchsorted(self._known, addresses)
        return self._known_ids[place]


class _Records:
    """Packet records found by a walk over the file, before their layers are read (`PcapReader.columns`)."""

    __slots__ = ("index", "ts_ns", "has_ts", "file_offset", "start", "ends", "caplen", "origlen", "link_type",
                 "interface_id", "odd", "ts_objects")

    def __init__(self) -> None:
        empty = np.zeros(0, dtype=np.int64)
        self.index = self.ts_ns = self.file_offset = self.start = self.caplen = self.origlen = empty
        self.link_type = np.zeros(0, dtype=np.int32)
        self.interface_id = np.zeros(0, dtype=np.int64)
        self.has_ts = self.ends = self.odd = None
        self.ts_objects: list | None = None


#: Link types whose IPv4 packets `PcapReader.columns` reads as arrays: (link type, link header
#: length, how the link header says "IPv4").
_FAST_LINKS = (
    (LINKTYPE_ETHERNET, 14, "ethertype"),
    (LINKTYPE_LINUX_SLL, 16, "ethertype"),
    (LINKTYPE_LINUX_SLL2, 20, "sll2"),
    (LINKTYPE_NULL, 4, "null"),
    (LINKTYPE_LOOP, 4, "loop"),
    (LINKTYPE_RAW, 0, "raw"),
    (LINKTYPE_IPV4, 0, "raw"),
)


_LINK_HEADERS = {link_type: (header, test) for link_type, header, test in _FAST_LINKS}


def _ipv4_udp_fields(ethertype: bool) -> np.dtype:
    """The fields of an IPv4 header without options and the UDP header after it (28 bytes), as
    `PcapReader._fast_rows` reads them from one gathered window: after the link header's ethertype
    (2 bytes more) when ``ethertype``."""
    names = ["version_ihl", "total_length", "fragment", "protocol", "src", "dst", "src_port", "dst_port", "udp_length"]
    formats = ["u1", ">u2", ">u2", "u1", ">u4", ">u4", ">u2", ">u2", ">u2"]
    offsets = [0, 2, 6, 9, 12, 16, 20, 22, 24]
    if ethertype:
        return np.dtype({"names": ["ethertype", *names], "formats": [">u2", *formats],
                         "offsets": [0, *(offset + 2 for offset in offsets)], "itemsize": 30})
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": 28})


_IPV4_UDP_FIELDS = _ipv4_udp_fields(False)
_ETHERTYPE_IPV4_UDP_FIELDS = _ipv4_udp_fields(True)


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when they all fit (lengths and interface numbers nearly always do)."""
    if values.dtype == np.int32:
        return values
    if not len(values) or (int(values.min()) >= -(1 << 31) and int(values.max()) < 1 << 31):
        return values.astype(np.int32)
    return values


def _typed(data: memoryview, fmt: str) -> np.ndarray:
    """``data`` read as ``fmt`` values at every byte offset (a view: index it with offsets to gather)."""
    kind = np.dtype(fmt)
    count = max(0, len(data) - kind.itemsize + 1)
    if not count:
        return np.zeros(0, dtype=kind)
    return np.ndarray((count,), dtype=kind, buffer=data, offset=0, strides=(1,))


class PcapReader:
    """Reads one capture held in memory.  See the module docstring for what is kept and reported."""

    def __init__(self, data: bytes | bytearray | memoryview, *, source: str | None = None) -> None:
        view = memoryview(data)
        # Slices of one flat byte view are the zero-copy payloads handed out with each packet.
        self._data = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self.source = source
        if len(self._data) < 4:
            raise DecodeError("a pcap or pcapng file header", source=source, offset=0)
        magic = bytes(self._data[:4])
        if magic == b"\x0a\x0d\x0d\x0a":
            self.format = "pcapng"
        elif int.from_bytes(magic, "little") in (
            PCAP_MAGIC_MICROSECONDS,
            PCAP_MAGIC_NANOSECONDS,
        ) or int.from_bytes(magic, "big") in (PCAP_MAGIC_MICROSECONDS, PCAP_MAGIC_NANOSECONDS):
            self.format = "pcap"
        else:
            raise DecodeError(
                f"pcap magic a1b2c3d4/a1b23c4d or pcapng 0a0d0d0a, found {magic.hex()}",
                source=source,
                offset=0,
            )
        self._reset()

    def _reset(self) -> None:
        self.problems: list[DecodeError] = []
        self.skipped: Counter[str] = Counter()
        self.truncated = False
        self.packet_count = 0
        self.udp_count = 0
        self.unreachable: list[PortUnreachable] = []
        self.interfaces: list[Interface] = []
        self._fragments: dict[tuple, _Fragments] = {}
        self._reported_link_types: set[int] = set()
        # Where a problem belongs in file order, for `columns`, which finds them out of order: after
        # packet ``_at``'s own problems (phase 0) or after the blocks that follow it (phase 1).
        self._at: float = 0
        self._phase = 0
        self._keys: list[tuple[float, int]] | None = None

    # --- public -------------------------------------------------------------------------------
    def packets(self) -> Iterator[Packet]:
        """Every complete UDP datagram in file order (reading again starts over)."""
        self._reset()
        if self.format == "pcap":
            yield from self._classic()
        else:
            yield from self._pcapng()
        self._incomplete_fragments()

    def _incomplete_fragments(self) -> None:
        self._at = float("inf")
        for key, pending in self._fragments.items():
            self._problem(
                f"IP fragments from packet {pending.first_index} on never completed the datagram"
                f" (id {key[3]}, {sum(len(p) for p in pending.pieces.values())} bytes seen)",
                pending.first_offset,
            )
            self.skipped["incomplete IP fragments"] += 1
        self._fragments.clear()

    def columns(self, *, read: Callable[[int, int], None] | None = None) -> PacketColumns:
        """The same datagrams as `packets`, with the same problems and counts, as columns.

        Records in the common layout (IPv4 without options or fragments, UDP, over Ethernet without
        VLAN tags, Linux cooked SLL/SLL2, NULL/LOOP or raw IP) are decoded a stretch of the file at a
        time, a handful of array operations per field; any other record goes through the same code as
        `packets` one at a time.  ``read(start, end)``, when given, is told of each stretch of bytes
        [start, end) that has been read (a caller with the file memory-mapped may let those pages go).
        """
        self._reset()
        self._keys = []
        try:
            names = _AddressBook()
            parts: list[PacketColumns] = []
            others: list[Packet] = []
            segments = self._classic_records() if self.format == "pcap" else iter([(self._pcapng_table(), None)])
            for records, done in segments:
                part, slow = self._fast_rows(records, names)
                parts.append(part)
                others += self._slow_rows(records, slow)
                if read is not None and done is not None:
                    read(*done)
            self._incomplete_fragments()
            columns = PacketColumns.joined(parts, names.names, self._data)
            if others:
                columns = columns.with_packets(others, names)
            return columns
        finally:
            if self._keys:
                order = sorted(range(len(self.problems)), key=self._keys.__getitem__)
                self.problems = [self.problems[i] for i in order]
            self._keys = None

    def _classic_records(self) -> Iterator[tuple[_Records, tuple[int, int]]]:
        """A classic pcap's records a stretch of about `SEGMENT_BYTES` at a time (the one loop over
        records in Python walks their headers), each with the bytes [start, end) its records lie in."""
        data = self._data
        size = len(data)
        if size < 24:
            self._fatal("a 24-byte pcap file header", 0)
            return
        order = "<" if int.from_bytes(data[:4], "little") in (PCAP_MAGIC_MICROSECONDS, PCAP_MAGIC_NANOSECONDS) else ">"
        magic, _major, _minor, _zone, _sigfigs, snaplen, network = struct.unpack_from(order + "IHHiIII", data, 0)
        link_type = network & 0xFFFF
        self.interfaces.append(Interface(link_type, snaplen, 1 if magic == PCAP_MAGIC_NANOSECONDS else 1000, 1, 0))
        limit = max(snaplen, MAX_RECORD_LENGTH)
        scale = self.interfaces[0].ts_multiplier
        # A record header (seconds, fraction, caplen, origlen) in one gather: a row per offset given.
        headers = np.ndarray((size - 15,), dtype="V16", buffer=data, offset=0, strides=(1,))
        word = np.dtype(order + "u4")
        unpack_caplen = struct.Struct(order + "I").unpack_from
        # In the machine's byte order, the file from byte 8 on as 32-bit words from each of the 4 byte
        # alignments: the caplen of a record at ``at`` (bytes at + 8 ..) is ``words[at & 3][at >> 2]``, an
        # index, no call, per record.
        native = (order == "<") == (sys.byteorder == "little")
        words = [data[start:start + max(0, (size - start) // 4 * 4)].cast("I") for start in range(8, 12)] if native else None
        offset = 24
        count = 0
        while offset <= size - 16:
            offsets: list[int] = []
            append = offsets.append
            first = offset
            # As short as it can be; a record that is too long or runs past the end is found below (the
            # walk may have gone on through garbage after it, which is then dropped).
            last = min(size - 16, offset + SEGMENT_BYTES)
            if words is not None:
                while offset <= last:
                    append(offset)
                    offset += 16 + words[offset & 3][offset >> 2]
            else:
                while offset <= last:
                    append(offset)
                    offset += 16 + unpack_caplen(data, offset + 8)[0]
            file_offset = np.array(offsets, dtype=np.int64)
            del offsets
            fields = headers[file_offset].view(word).reshape(-1, 4)  # (a gather of void windows: the fastest)
            caplen = fields[:, 2].astype(np.int64)
            bad = np.flatnonzero((caplen > limit) | (file_offset + 16 + caplen > size))
            if len(bad):
                stop = int(bad[0])
                at, length = int(file_offset[stop]), int(caplen[stop])
                file_offset, caplen, fields = file_offset[:stop], caplen[:stop], fields[:stop]
            records = _Records()
            n = len(file_offset)
            records.index = np.arange(count + 1, count + n + 1, dtype=np.int64)
            records.ts_ns = fields[:, 0].astype(np.int64) * 1_000_000_000
            records.ts_ns += fields[:, 1].astype(np.int64) * scale
            records.file_offset = file_offset
            records.start = file_offset + 16
            records.caplen = caplen
            records.origlen = fields[:, 3].astype(np.int64)
            del fields
            records.link_type = np.full(n, link_type, dtype=np.int32)
            records.interface_id = np.zeros(n, dtype=np.int32)
            count += n
            self.packet_count = count
            if len(bad):
                if length > limit:
                    self._fatal(f"a record of at most {limit} bytes, header says {length} (corrupt record header)",
                                at)
                else:
                    self._fatal(f"a record of {length} bytes, only {size - at - 16} left (file cut short)", at,
                                count + 1)
                yield records, (first, size)
                return
            yield records, (first, min(offset, size))
        if offset < size:
            self._fatal(f"a 16-byte record header, only {size - offset} bytes left (file cut short)", offset)

    def _pcapng_table(self) -> _Records:
        """A pcapng's packet records (block by block, in Python: the blocks vary too much to do otherwise)."""
        rows = list(self._pcapng_records())
        records = _Records()
        count = len(rows)
        records.index = np.fromiter((r[4] for r in rows), np.int64, count)
        missing = [i for i, r in enumerate(rows) if r[5] is None]
        if missing:
            records.has_ts = np.ones(count, dtype=bool)
            records.has_ts[missing] = False
        times = [r[5] for r in rows]
        huge = [t is not None and not _INT64_MIN <= t <= _INT64_MAX for t in times]
        if any(huge):  # a time beyond int64 nanoseconds: such records take the one-by-one path
            records.odd = np.array(huge, dtype=bool)
            records.ts_objects = times
            times = [0 if h else t for t, h in zip(times, huge, strict=True)]
        records.ts_ns = np.fromiter((0 if t is None else t for t in times), np.int64, count)
        records.file_offset = np.fromiter((r[6] for r in rows), np.int64, count)
        records.start = np.fromiter((r[2] for r in rows), np.int64, count)
        records.caplen = np.fromiter((r[8] for r in rows), np.int64, count)
        records.origlen = np.fromiter((r[9] for r in rows), np.int64, count)
        records.link_type = np.fromiter((r[0] for r in rows), np.int32, count)
        records.interface_id = np.fromiter((r[7] for r in rows), np.int64, count)
        records.ends = np.fromiter((r[3] for r in rows), np.int64, count)
        return records

    def _fast_rows(self, records: _Records, names: _AddressBook) -> tuple[PacketColumns, np.ndarray]:
        """The records in the common layout, as columns; and where the others are, to be read one by one."""
        data = self._data
        count = len(records.index)
        start, caplen, link = records.start, records.caplen, records.link_type
        one_link = len(self.interfaces) == 1 and self.format == "pcap"  # a classic pcap: one link type
        header, test = _LINK_HEADERS.get(int(link[0]), (0, "")) if one_link and count else (0, "")
        if test == "ethertype" and records.odd is None and bool((caplen >= header + 28).all()):
            # The common case, every record of a classic pcap long enough: the ethertype, IPv4 and UDP
            # headers' fields in one gather, tested together (as the general way below does in steps).
            headers = np.ndarray((len(data) - 29,), dtype="V30", buffer=data, offset=0,
                                 strides=(1,))[start + (header - 2)].view(_ETHERTYPE_IPV4_UDP_FIELDS)
            total = headers["total_length"].astype(np.int32)
            udp_length = headers["udp_length"].astype(np.int32)
            fast = (
                (headers["ethertype"] == ETHERTYPE_IPV4)
                & (headers["version_ihl"] == 0x45)
                & (headers["protocol"] == IP_PROTOCOL_UDP)
                & ((headers["fragment"] & 0x3FFF) == 0)
                & (total >= 28)
                & (total <= caplen - header)
                & (udp_length >= 8)
                & (udp_length <= total - 20)
            )
            every = bool(fast.all())
            if every:
                at = start + header
            else:
                rows = np.flatnonzero(fast)
                at, headers, udp_length = start[rows] + header, headers[rows], udp_length[rows]
            del total, fast
        else:
            ends = records.ends if records.ends is not None else start + caplen
            rows, at, headers, udp_length, every = self._ipv4_udp_rows(records, ends)

        def mine(values: np.ndarray) -> np.ndarray:
            return values if every else values[rows]

        columns = PacketColumns(
            index=mine(records.index),
            ts_ns=mine(records.ts_ns),
            src=names.ipv4_ids(headers["src"]),
            src_port=headers["src_port"].astype(np.int32),
            dst=names.ipv4_ids(headers["dst"]),
            dst_port=headers["dst_port"].astype(np.int32),
            payload_offset=at + 28,
            payload_length=(udp_length - 8).astype(np.int32),
            file_offset=mine(records.file_offset),
            interface_id=_narrow(mine(records.interface_id)),
            caplen=_narrow(mine(records.caplen)),
            origlen=_narrow(mine(records.origlen)),
            has_ts=mine(records.has_ts) if records.has_ts is not None else None,
            addresses=names.names,
            data=data,
        )
        self.udp_count += len(at)
        if every:
            return columns, np.zeros(0, dtype=np.int64)
        slow = np.ones(count, dtype=bool)
        slow[rows] = False
        return columns, np.flatnonzero(slow)

    def _ipv4_udp_rows(self, records: _Records, ends: np.ndarray) -> tuple:
        """`_fast_rows` in general: which rows are in the common layout (every link type, each test in
        turn); those rows, their IPv4 headers' offsets, their IPv4/UDP fields and UDP lengths, and
        whether that is every row."""
        data = self._data
        count = len(records.index)
        start, link = records.start, records.link_type
        # The link header's length, where the link layer says the packet is IPv4; -1 where it does not.
        ip = np.full(count, -1, dtype=np.int64)
        u8, be16, be32 = _typed(data, "u1"), _typed(data, ">u2"), _typed(data, ">u4")
        one_link = len(self.interfaces) == 1 and self.format == "pcap"  # a classic pcap: one link type
        present = {int(link[0])} if one_link and count else set(np.unique(link).tolist())
        for link_type, header, test in _FAST_LINKS:
            if link_type not in present:
                continue
            long_enough = ends - start >= header + 28
            rows = np.flatnonzero(long_enough if one_link else (link == link_type) & long_enough)
            at = start[rows]
            if test == "ethertype":
                ok = be16[at + header - 2] == ETHERTYPE_IPV4
            elif test == "sll2":
                ok = be16[at] == ETHERTYPE_IPV4
            elif test == "null":
                family = _typed(data, "<u4")[at]
                family = np.where(family > 0xFFFF, be32[at], family)
                ok = family == _AF_INET
            elif test == "loop":
                ok = be32[at] == _AF_INET
            else:  # raw: the IP version in the first nibble
                ok = (u8[at] >> 4) == 4
            ip[rows[ok]] = at[ok] + header
        rows = np.flatnonzero(ip >= 0)
        at = ip[rows]
        # The IPv4 and UDP headers' fields in one gather (every row has its 28 bytes: see above).
        headers = np.ndarray((max(0, len(data) - 27),), dtype="V28", buffer=data, offset=0,
                             strides=(1,))[at].view(_IPV4_UDP_FIELDS)
        total = headers["total_length"].astype(np.int64)
        udp_length = headers["udp_length"].astype(np.int64)
        room = ends[rows] - at
        fast = (
            (headers["version_ihl"] == 0x45)
            & (headers["protocol"] == IP_PROTOCOL_UDP)
            & ((headers["fragment"] & 0x3FFF) == 0)
            & (total >= 28)
            & (total <= room)
            & (udp_length >= 8)
            & (udp_length <= total - 20)
        )
        if records.odd is not None:
            fast &= ~records.odd[rows]
        every = len(rows) == count and bool(fast.all())  # the common case: no row left for one at a time
        if not every:
            rows, at, headers, udp_length = rows[fast], at[fast], headers[fast], udp_length[fast]
        return rows, at, headers, udp_length, every

    def _slow_rows(self, records: _Records, rows: np.ndarray) -> list[Packet]:
        """These records one at a time and in file order, as `packets` reads them."""
        data = self._data
        others = []
        dissect = self._dissect
        self._phase = 0
        start, caplen, link = records.start, records.caplen, records.link_type
        ends = records.ends if records.ends is not None else start + caplen
        for row in rows.tolist():
            index = int(records.index[row])
            self._at = index
            ts = records.ts_objects[row] if records.ts_objects is not None else int(records.ts_ns[row])
            if records.has_ts is not None and not records.has_ts[row]:
                ts = None
            packet = dissect(int(link[row]), data, int(start[row]), int(ends[row]), index, ts,
                             int(records.file_offset[row]), int(records.interface_id[row]), int(caplen[row]),
                             int(records.origlen[row]))
            if packet is not None:
                others.append(packet)
        return others



    # --- classic pcap -------------------------------------------------------------------------
    def _classic(self) -> Iterator[Packet]:
        data = self._data
        size = len(data)
        if size < 24:
            self._fatal("a 24-byte pcap file header", 0)
            return
        if int.from_bytes(data[:4], "little") in (PCAP_MAGIC_MICROSECONDS, PCAP_MAGIC_NANOSECONDS):
            order = "<"
        else:
            order = ">"
        magic, _major, _minor, _zone, _sigfigs, snaplen, network = struct.unpack_from(
            order + "IHHiIII", data, 0
        )
        fraction_ns = 1 if magic == PCAP_MAGIC_NANOSECONDS else 1000
        link_type = network & 0xFFFF
        self.interfaces.append(Interface(link_type, snaplen, fraction_ns, 1, 0))
        record = struct.Struct(order + "IIII")
        unpack_record = record.unpack_from
        limit = max(snaplen, MAX_RECORD_LENGTH)
        dissect = self._dissect
        # The common case (Ethernet, IPv4 without options, whole UDP) is decoded right here with
        # one unpack: a method call per packet would cost as much as the decoding itself.
        fast = link_type == LINKTYPE_ETHERNET
        unpack_fast = _ETHERNET_IPV4_UDP.unpack_from
        names = _IPV4_NAMES
        new_packet = tuple.__new__
        offset = 24
        index = 0
        while offset < size:
            if size - offset < 16:
                self._fatal(
                    f"a 16-byte record header, only {size - offset} bytes left (file cut short)", offset
                )
                return
            seconds, fraction, caplen, origlen = unpack_record(data, offset)
            start = offset + 16
            end = start + caplen
            if caplen > limit:
                self._fatal(
                    f"a record of at most {limit} bytes, header says {caplen} (corrupt record header)", offset
                )
                return
            if end > size:
                self._fatal(
                    f"a record of {caplen} bytes, only {size - start} left (file cut short)",
                    offset,
                    index + 1,
                )
                return
            index += 1
            self.packet_count = index
            ts_ns = seconds * 1_000_000_000 + fraction * fraction_ns
            if fast and caplen >= 42:
                (
                    ethertype,
                    version_ihl,
                    total_length,
                    fragment,
                    protocol,
                    src,
                    dst,
                    src_port,
                    dst_port,
                    udp_length,
                ) = unpack_fast(data, start)
                if (
                    ethertype == ETHERTYPE_IPV4
                    and version_ihl == 0x45
                    and protocol == IP_PROTOCOL_UDP
                    and not fragment & 0x3FFF
                    and 28 <= total_length <= caplen - 14
                    and 8 <= udp_length <= total_length - 20
                ):
                    self.udp_count += 1
                    src_name = names.get(src) or _ipv4_name(src)
                    dst_name = names.get(dst) or _ipv4_name(dst)
                    yield new_packet(
                        Packet,
                        (
                            index,
                            ts_ns,
                            src_name,
                            src_port,
                            dst_name,
                            dst_port,
                            data[start + 42 : start + 34 + udp_length],
                            offset,
                            0,
                            caplen,
                            origlen,
                            start + 42,
                        ),
                    )
                    offset = end
                    continue
            packet = dissect(link_type, data, start, end, index, ts_ns, offset, 0, caplen, origlen)
            if packet is not None:
                yield packet
            offset = end

    # --- pcapng -------------------------------------------------------------------------------
    def _pcapng(self) -> Iterator[Packet]:
        dissect = self._dissect
        for record in self._pcapng_records():
            packet = dissect(*record)
            if packet is not None:
                yield packet

    def _pcapng_records(self) -> Iterator[tuple]:
        """Each packet block's record, as the arguments of `_dissect`, in file order; what is wrong
        with a block goes to ``problems`` (a block that cannot be walked past ends the reading)."""
        data = self._data
        size = len(data)
        offset = 0
        order = "<"
        block_header = struct.Struct("<II")
        index = 0
        while offset < size:
            if size - offset < 12:
                self._fatal(
                    f"a pcapng block header, only {size - offset} bytes left (file cut short)", offset
                )
                return
            if bytes(data[offset : offset + 4]) == b"\x0a\x0d\x0d\x0a":
                byte_order_magic = bytes(data[offset + 8 : offset + 12])
                if byte_order_magic == b"\x4d\x3c\x2b\x1a":
                    order = "<"
                elif byte_order_magic == b"\x1a\x2b\x3c\x4d":
                    order = ">"
                else:
                    self._fatal(
                        f"pcapng byte-order magic 1a2b3c4d, found {byte_order_magic.hex()}", offset + 8
                    )
                    return
                block_header = struct.Struct(order + "II")
                self.interfaces = []  # interface ids restart in every section
            block_type, block_length = block_header.unpack_from(data, offset)
            if block_length < 12 or block_length % 4:
                self._fatal(
                    f"a pcapng block length that is a multiple of 4 and >= 12, found {block_length}", offset
                )
                return
            if offset + block_length > size:
                self._fatal(
                    f"a pcapng block of {block_length} bytes, only {size - offset} left (file cut short)",
                    offset,
                    index + 1
                    if block_type in (PCAPNG_ENHANCED_PACKET, PCAPNG_SIMPLE_PACKET, PCAPNG_OBSOLETE_PACKET)
                    else None,
                )
                return
            (trailer,) = struct.unpack_from(order + "I", data, offset + block_length - 4)
            if trailer != block_length:
                self._fatal(
                    f"the block's trailing length {block_length}, found {trailer} (corrupt block)", offset
                )
                return
            body = offset + 8
            body_end = offset + block_length - 4
            if block_type == PCAPNG_ENHANCED_PACKET or block_type == PCAPNG_OBSOLETE_PACKET:
                index += 1
                self.packet_count = self._at = index
                if body_end - body < 20:
                    self._problem("a packet block body of at least 20 bytes", offset, index)
                    offset += block_length
                    continue
                if block_type == PCAPNG_ENHANCED_PACKET:
                    interface_id, high, low, caplen, origlen = struct.unpack_from(order + "IIIII", data, body)
                else:
                    interface_id, _drops, high, low, caplen, origlen = struct.unpack_from(
                        order + "HHIIII", data, body
                    )
                start = body + 20
                end = start + caplen
                if end > body_end:
                    self._problem(f"captured length {caplen} within its block", offset, index)
                elif interface_id >= len(self.interfaces):
                    self._problem(f"interface {interface_id} described before its packets", offset, index)
                else:
                    interface = self.interfaces[interface_id]
                    ts = ((high << 32) | low) * interface.ts_multiplier // interface.ts_divisor
                    yield (interface.link_type, data, start, end, index, ts + interface.ts_offset_ns, offset,
                           interface_id, caplen, origlen)
            elif block_type == PCAPNG_SIMPLE_PACKET:
                index += 1
                self.packet_count = self._at = index
                if not self.interfaces:
                    self._problem("an interface description block before simple packets", offset, index)
                elif body_end - body < 4:
                    self._problem("a simple packet block body of at least 4 bytes", offset, index)
                else:
                    interface = self.interfaces[0]
                    (origlen,) = struct.unpack_from(order + "I", data, body)
                    caplen = min(origlen, body_end - body - 4)
                    if interface.snaplen:
                        caplen = min(caplen, interface.snaplen)
                    start = body + 4
                    yield (interface.link_type, data, start, start + caplen, index, None, offset, 0, caplen,
                           origlen)
            elif block_type == PCAPNG_INTERFACE_DESCRIPTION:
                self._phase = 1  # a problem here comes after those of the packet before it
                self._interface(data, body, body_end, order, offset)
                self._phase = 0
            offset += block_length

    def _interface(self, data, body: int, body_end: int, order: str, offset: int) -> None:
        if body_end - body < 8:
            self._problem("an interface description block body of at least 8 bytes", offset)
            self.interfaces.append(Interface(-1, 0))
            return
        link_type, _reserved, snaplen = struct.unpack_from(order + "HHI", data, body)
        multiplier, divisor, offset_ns = 1000, 1, 0  # default resolution: microseconds
        option = body + 8
        option_header = struct.Struct(order + "HH")
        while option + 4 <= body_end:
            code, length = option_header.unpack_from(data, option)
            if code == 0:
                break
            value = option + 4
            if value + length > body_end:
                self._problem("interface options within their block", offset)
                break
            if code == 9 and length >= 1:  # if_tsresol
                resolution = data[value]
                exponent = resolution & 0x7F
                if resolution & 0x80:
                    multiplier, divisor = 1_000_000_000, 1 << exponent
                elif exponent <= 9:
                    multiplier, divisor = 10 ** (9 - exponent), 1
                else:
                    multiplier, divisor = 1, 10 ** (exponent - 9)
            elif code == 14 and length >= 8:  # if_tsoffset, seconds
                (seconds,) = struct.unpack_from(order + "q", data, value)
                offset_ns = seconds * 1_000_000_000
            option = value + ((length + 3) & ~3)
        self.interfaces.append(Interface(link_type, snaplen, multiplier, divisor, offset_ns))

    # --- link, network and transport layers ---------------------------------------------------
    def _dissect(
        self,
        link_type: int,
        data,
        start: int,
        end: int,
        index: int,
        ts_ns: int | None,
        file_offset: int,
        interface_id: int,
        caplen: int,
        origlen: int,
    ) -> Packet | None:
        if link_type == LINKTYPE_ETHERNET and end - start >= 42:
            (
                ethertype,
                version_ihl,
                total_length,
                fragment,
                protocol,
                src,
                dst,
                src_port,
                dst_port,
                udp_length,
            ) = _ETHERNET_IPV4_UDP.unpack_from(data, start)
            if (
                ethertype == ETHERTYPE_IPV4
                and version_ihl == 0x45
                and protocol == IP_PROTOCOL_UDP
                and not fragment & 0x3FFF
                and 28 <= total_length <= end - start - 14
                and 8 <= udp_length <= total_length - 20
            ):
                self.udp_count += 1
                return Packet(
                    index,
                    ts_ns,
                    _ipv4_name(src),
                    src_port,
                    _ipv4_name(dst),
                    dst_port,
                    data[start + 42 : start + 34 + udp_length],
                    file_offset,
                    interface_id,
                    caplen,
                    origlen,
                    start + 42,
                )
        network = self._network_layer(link_type, data, start, end)
        if type(network) is str:
            self.skipped[network] += 1
            return None
        version, ip_start = network
        context = (index, ts_ns, file_offset, interface_id, caplen, origlen)
        if version == 4:
            return self._ipv4(data, ip_start, end, context)
        return self._ipv6(data, ip_start, end, context)

    def _network_layer(self, link_type: int, data, start: int, end: int) -> tuple[int, int] | str:
        """(IP version, offset of the IP header), or why the packet is not IP."""
        length = end - start
        if link_type == LINKTYPE_ETHERNET:
            if length < 14:
                return "link header cut short"
            (ethertype,) = _U16BE.unpack_from(data, start + 12)
            offset = start + 14
            while ethertype in _VLAN_ETHERTYPES:
                if end - offset < 4:
                    return "link header cut short"
                (ethertype,) = _U16BE.unpack_from(data, offset + 2)
                offset += 4
            return _ethertype(ethertype, offset)
        if link_type == LINKTYPE_LINUX_SLL:
            if length < 16:
                return "link header cut short"
            return _ethertype(_U16BE.unpack_from(data, start + 14)[0], start + 16)
        if link_type == LINKTYPE_LINUX_SLL2:
            if length < 20:
                return "link header cut short"
            return _ethertype(_U16BE.unpack_from(data, start)[0], start + 20)
        if link_type == LINKTYPE_NULL or link_type == LINKTYPE_LOOP:
            if length < 4:
                return "link header cut short"
            if link_type == LINKTYPE_LOOP:
                family = int.from_bytes(data[start : start + 4], "big")
            else:
                # The capturing host's byte order, which the file does not record: a family is small.
                family = int.from_bytes(data[start : start + 4], "little")
                if family > 0xFFFF:
                    family = int.from_bytes(data[start : start + 4], "big")
            if family == _AF_INET:
                return 4, start + 4
            if family in _AF_INET6:
                return 6, start + 4
            return f"not IP (address family {family})"
        if link_type == LINKTYPE_RAW or link_type == LINKTYPE_IPV4 or link_type == LINKTYPE_IPV6:
            if length < 1:
                return "empty packet"
            version = data[start] >> 4
            if version in (4, 6):
                return version, start
            return f"not IP (IP version {version})"
        if link_type not in self._reported_link_types:
            self._reported_link_types.add(link_type)
            self._problem(
                f"a supported link type (0, 1, 101, 108, 113, 228, 229, 276), found {link_type}", None
            )
        return f"link type {link_type} not supported"

    def _ipv4(self, data, ip: int, end: int, context: tuple) -> Packet | None:
        index, _, file_offset, _, caplen, origlen = context
        if end - ip < 20:
            return self._cut_or_malformed("IPv4 header", context)
        version_ihl, total_length, _ident, fragment, protocol, src, dst = _IPV4.unpack_from(data, ip)
        header_length = (version_ihl & 0x0F) * 4
        if version_ihl >> 4 != 4 or header_length < 20 or total_length < header_length:
            self.skipped["malformed IPv4 header"] += 1
            self._problem(
                f"an IPv4 header (version/IHL {version_ihl:#04x}, total length {total_length})",
                file_offset,
                index,
            )
            return None
        if protocol != IP_PROTOCOL_UDP:
            if not (protocol == IP_PROTOCOL_ICMP and self._port_unreachable(data, ip + header_length,
                                                                               min(ip + total_length, end), 3, 3,
                                                                               context)):
                self.skipped[f"not UDP (IP protocol {protocol})"] += 1
            return None
        ip_end = ip + total_length
        if ip_end > end:
            return self._cut_or_malformed("IPv4 datagram", context)
        more = fragment & 0x2000
        fragment_offset = (fragment & 0x1FFF) * 8
        if more or fragment_offset:
            key = (4, src, dst, _ident, protocol)
            whole = self._add_fragment(
                key, fragment_offset, more, bytes(data[ip + header_length : ip_end]), context
            )
            if whole is None:
                return None
            return self._udp(
                memoryview(whole), 0, len(whole), _ipv4_name(src), _ipv4_name(dst), context, False
            )
        return self._udp(data, ip + header_length, ip_end, _ipv4_name(src), _ipv4_name(dst), context, True)

    def _ipv6(self, data, ip: int, end: int, context: tuple) -> Packet | None:
        index, _, file_offset, _, caplen, origlen = context
        if end - ip < 40:
            return self._cut_or_malformed("IPv6 header", context)
        payload_length, next_header, src, dst = _IPV6.unpack_from(data, ip)
        if data[ip] >> 4 != 6:
            self.skipped["malformed IPv6 header"] += 1
            self._problem("an IPv6 header (version 6)", file_offset, index)
            return None
        # Payload length 0 means a jumbogram (RFC 2675): the payload runs to the end of the packet.
        ip_end = ip + 40 + payload_length if payload_length else end
        if ip_end > end:
            return self._cut_or_malformed("IPv6 datagram", context)
        offset = ip + 40
        fragment = None
        while next_header != IP_PROTOCOL_UDP:
            if next_header in _IPV6_EXTENSION_HEADERS or next_header == _IPV6_AUTHENTICATION:
                if ip_end - offset < 8:
                    return self._cut_or_malformed("IPv6 extension header", context)
                following = data[offset]
                units = data[offset + 1]
                offset += (units + 2) * 4 if next_header == _IPV6_AUTHENTICATION else (units + 1) * 8
                next_header = following
            elif next_header == _IPV6_FRAGMENT:
                if ip_end - offset < 8:
                    return self._cut_or_malformed("IPv6 fragment header", context)
                following = data[offset]
                (offset_and_flags,) = _U16BE.unpack_from(data, offset + 2)
                (ident,) = _U32BE.unpack_from(data, offset + 4)
                offset += 8
                next_header = following
                if offset_and_flags & 0xFFF9:  # an atomic fragment (offset 0, M clear) is a whole datagram
                    fragment = (offset_and_flags & 0xFFF8, offset_and_flags & 1, ident)
            else:
                if not (next_header == IP_PROTOCOL_ICMPV6 and self._port_unreachable(data, offset, ip_end, 1, 4,
                                                                                      context)):
                    self.skipped[f"not UDP (IPv6 next header {next_header})"] += 1
                return None
            if offset > ip_end:
                return self._cut_or_malformed("IPv6 extension header", context)
        src_name, dst_name = _ipv6_name(src), _ipv6_name(dst)
        if fragment is not None:
            fragment_offset, more, ident = fragment
            whole = self._add_fragment(
                (6, src, dst, ident, IP_PROTOCOL_UDP),
                fragment_offset,
                more,
                bytes(data[offset:ip_end]),
                context,
            )
            if whole is None:
                return None
            return self._udp(memoryview(whole), 0, len(whole), src_name, dst_name, context, False)
        return self._udp(data, offset, ip_end, src_name, dst_name, context, True)

    def _udp(
        self, data, udp: int, end: int, src: str, dst: str, context: tuple, in_file: bool
    ) -> Packet | None:
        index, ts_ns, file_offset, interface_id, caplen, origlen = context
        if end - udp < 8:
            return self._cut_or_malformed("UDP header", context)
        src_port, dst_port, udp_length = _UDP.unpack_from(data, udp)
        if udp_length == 0 and end - udp > 0xFFFF:
            udp_length = end - udp  # IPv6 jumbogram
        if udp_length < 8 or udp + udp_length > end:
            self.skipped["malformed UDP header"] += 1
            self._problem(f"a UDP length of 8..{end - udp}, found {udp_length}", file_offset, index)
            return None
        payload = data[udp + 8 : udp + udp_length]
        self.udp_count += 1
        return Packet(
            index,
            ts_ns,
            src,
            src_port,
            dst,
            dst_port,
            payload if in_file else bytes(payload),
            file_offset,
            interface_id,
            caplen,
            origlen,
            udp + 8 if in_file else None,
        )

    def _port_unreachable(self, data, icmp: int, end: int, kind: int, code: int, context: tuple) -> bool:
        """An ICMP(v6) destination unreachable / port unreachable quoting an IPv4 or IPv6 UDP datagram:
        kept in ``unreachable``; False when the packet is anything else."""
        if end - icmp < 8 or data[icmp] != kind or data[icmp + 1] != code:
            return False
        quoted = icmp + 8
        if end - quoted < 1:
            return False
        version = data[quoted] >> 4
        if version == 4 and end - quoted >= 28:
            header = (data[quoted] & 0x0F) * 4
            if data[quoted + 9] != IP_PROTOCOL_UDP or header < 20 or end - quoted < header + 4:
                return False
            src, dst = _ipv4_name(bytes(data[quoted + 12 : quoted + 16])), _ipv4_name(bytes(data[quoted + 16 : quoted + 20]))
            udp = quoted + header
        elif version == 6 and end - quoted >= 44:
            if data[quoted + 6] != IP_PROTOCOL_UDP:
                return False
            src, dst = _ipv6_name(bytes(data[quoted + 8 : quoted + 24])), _ipv6_name(bytes(data[quoted + 24 : quoted + 40]))
            udp = quoted + 40
        else:
            return False
        src_port, dst_port = struct.unpack_from("!HH", data, udp)
        index, ts_ns = context[0], context[1]
        self.unreachable.append(PortUnreachable(index, ts_ns, src, src_port, dst, dst_port))
        self.skipped[UNREACHABLE] += 1
        return True

    def _cut_or_malformed(self, what: str, context: tuple) -> None:
        index, _, file_offset, _, caplen, origlen = context
        if caplen < origlen:
            self.skipped["cut by snaplen"] += 1
            self._problem(
                f"a whole {what}, but the packet was cut by the capture's snaplen"
                f" ({caplen} of {origlen} bytes kept); not decoded",
                file_offset,
                index,
            )
        else:
            self.skipped[f"{what} cut short"] += 1
            self._problem(f"a whole {what} within the packet's {caplen} bytes", file_offset, index)
        return None

    def _add_fragment(self, key: tuple, offset: int, more: int, piece: bytes, context: tuple) -> bytes | None:
        index, _, file_offset, _, _, _ = context
        pending = self._fragments.get(key)
        if pending is None:
            if len(self._fragments) >= _MAX_PENDING_FRAGMENTED_DATAGRAMS:
                oldest_key = next(iter(self._fragments))
                oldest = self._fragments.pop(oldest_key)
                self.skipped["incomplete IP fragments"] += 1
                self._problem(
                    f"IP fragments from packet {oldest.first_index} on never completed the datagram"
                    f" (id {oldest_key[3]}; too many datagrams in reassembly)",
                    oldest.first_offset,
                )
            pending = self._fragments[key] = _Fragments(first_index=index, first_offset=file_offset)
        pending.pieces.setdefault(offset, piece)
        if not more:
            pending.total = offset + len(piece)
        if pending.total is None:
            return None
        covered = 0
        for start in sorted(pending.pieces):
            if start > covered:
                return None
            covered = max(covered, start + len(pending.pieces[start]))
        if covered < pending.total:
            return None
        del self._fragments[key]
        whole = bytearray(pending.total)
        for start in sorted(pending.pieces):
            chunk = pending.pieces[start][: max(0, pending.total - start)]
            whole[start : start + len(chunk)] = chunk
        return bytes(whole)

    # --- problems -----------------------------------------------------------------------------
    def _problem(self, expected: str, offset: int | None, index: int | None = None) -> None:
        where = f"packet {index}: " if index is not None else ""
        self.problems.append(DecodeError(where + expected, source=self.source, offset=offset))
        if self._keys is not None:
            self._keys.append((self._at, self._phase))

    def _fatal(self, expected: str, offset: int, index: int | None = None) -> None:
        self.truncated = True
        self._at = float("inf")  # nothing is read after it
        self._problem(expected, offset, index)


def _ethertype(ethertype: int, offset: int) -> tuple[int, int] | str:
    if ethertype == ETHERTYPE_IPV4:
        return 4, offset
    if ethertype == ETHERTYPE_IPV6:
        return 6, offset
    return f"not IP (ethertype {ethertype:#06x})"


_IPV4_NAMES: dict[bytes, str] = {}
_IPV6_NAMES: dict[bytes, str] = {}


def _ipv4_name(address: bytes) -> str:
    # A cluster has a handful of hosts; formatting each address once saves most of the work.
    name = _IPV4_NAMES.get(address)
    if name is None:
        if len(_IPV4_NAMES) > 65536:
            _IPV4_NAMES.clear()
        name = _IPV4_NAMES[address] = socket.inet_ntop(socket.AF_INET, address)
    return name


def _ipv6_name(address: bytes) -> str:
    name = _IPV6_NAMES.get(address)
    if name is None:
        if len(_IPV6_NAMES) > 65536:
            _IPV6_NAMES.clear()
        name = _IPV6_NAMES[address] = socket.inet_ntop(socket.AF_INET6, address)
    return name


def iter_packets(data: bytes | bytearray | memoryview, *, source: str | None = None) -> Iterator[Packet]:
    """Every UDP packet of a capture; then, if anything was wrong, the first problem as DecodeError."""
    reader = PcapReader(data, source=source)
    yield from reader.packets()
    if reader.problems:
        raise reader.problems[0]


# --- Writing ------------------------------------------------------------------------------------
_PCAP_FILE_HEADER = struct.Struct("<IHHiIII")
_PCAP_RECORD = struct.Struct("<IIII")
_IPV4_HEADER = struct.Struct("!BBHHHBBH4s4s")
_UDP_HEADER = struct.Struct("!HHHH")
_ETHERNET_HEADER = b"\x00" * 12 + b"\x08\x00"  # loopback-style zero MACs, IPv4


class PcapWriter:
    """Builds a classic pcap (nanosecond timestamps) of UDP/IPv4 packets, as bytes for the caller to write.

    ``link_type`` is LINKTYPE_ETHERNET (zero MAC addresses, as tcpdump shows loopback) or
    LINKTYPE_RAW / LINKTYPE_IPV4.  IP identification numbers count up from 1, so equal input gives
    equal bytes.
    """

    def __init__(self, *, link_type: int = LINKTYPE_ETHERNET, snaplen: int = MAX_RECORD_LENGTH) -> None:
        if link_type not in (LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_IPV4):
            raise ValueError(f"PcapWriter writes Ethernet (1) or raw IPv4 (101, 228) links, not {link_type}")
        self.link_type = link_type
        self.snaplen = snaplen
        self._ident = 0

    def file_header(self) -> bytes:
        return _PCAP_FILE_HEADER.pack(PCAP_MAGIC_NANOSECONDS, 2, 4, 0, 0, self.snaplen, self.link_type)

    def udp_packet(
        self, ts_ns: int, src_ip: str, src_port: int, dst_ip: str, dst_port: int, payload: bytes | memoryview
    ) -> bytes:
        """One pcap record holding an IPv4/UDP datagram (checksums computed)."""
        if ts_ns < 0:
            raise ValueError("pcap timestamps cannot be before 1970")
        payload = bytes(payload)
        udp_length = 8 + len(payload)
        total_length = 20 + udp_length
        if total_length > 0xFFFF:
            raise ValueError(f"a UDP payload of {len(payload)} bytes does not fit one IPv4 datagram")
        src = socket.inet_pton(socket.AF_INET, src_ip)
        dst = socket.inet_pton(socket.AF_INET, dst_ip)
        self._ident = (self._ident + 1) & 0xFFFF
        ip_header = _IPV4_HEADER.pack(
            0x45, 0, total_length, self._ident, 0x4000, 64, IP_PROTOCOL_UDP, 0, src, dst
        )
        ip_header = ip_header[:10] + _U16BE.pack(_checksum(ip_header)) + ip_header[12:]
        pseudo_header = src + dst + bytes((0, IP_PROTOCOL_UDP)) + _U16BE.pack(udp_length)
        udp_header = _UDP_HEADER.pack(src_port, dst_port, udp_length, 0)
        udp_checksum = _checksum(pseudo_header + udp_header + payload) or 0xFFFF
        udp_header = udp_header[:6] + _U16BE.pack(udp_checksum)
        link = _ETHERNET_HEADER if self.link_type == LINKTYPE_ETHERNET else b""
        packet = link + ip_header + udp_header + payload
        caplen = min(len(packet), self.snaplen)
        seconds, nanos = divmod(ts_ns, 1_000_000_000)
        return _PCAP_RECORD.pack(seconds, nanos, caplen, len(packet)) + packet[:caplen]


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) without a per-byte Python loop."""
    if len(data) % 2:
        data += b"\x00"
    # One's-complement sums commute with byte swapping, so summing native-order words and swapping
    # the folded result gives the network-order sum.
    total = sum(memoryview(data).cast("H"))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    if sys.byteorder == "little":
        total = ((total & 0xFF) << 8) | (total >> 8)
    return ~total & 0xFFFF
