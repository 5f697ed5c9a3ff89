"""pcap / pcapng reading and classic pcap writing: formats, link types, IP layers, damage, tshark."""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import pcap as pcap_module
from formats.errors import DecodeError
from formats.pcap import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    PcapReader,
    PcapWriter,
    iter_packets,
)
from formats.udp import (
    Nak,
    PadFrame,
    Rttm,
    SetupFrame,
    StatusMessage,
    data_frame,
    decode_datagram,
    encode_datagram,
    fragment_message,
    heartbeat,
)

PAYLOAD = encode_datagram(
    [data_frame(session_id=7, stream_id=108, term_id=1, term_offset=0, payload=b"vote")]
)
TS = 1_795_312_187_846_789_123  # ns


# --- Builders for hand-made captures --------------------------------------------------------------
def ipv4(
    payload: bytes,
    *,
    src="10.0.0.1",
    dst="10.0.0.2",
    sport=40000,
    dport=20103,
    options=b"",
    proto=17,
    ident=1,
    fragment=0,
    udp=True,
) -> bytes:
    body = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload if udp else payload
    ihl = (20 + len(options)) // 4
    header = struct.pack(
        "!BBHHHBBH4s4s",
        0x40 | ihl,
        0,
        4 * ihl + len(body),
        ident,
        fragment,
        64,
        proto,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    )
    return header + options + body


def ipv6(
    payload: bytes, *, src="fd00::1", dst="fd00::2", sport=40000, dport=20103, extensions=(), udp=True
) -> bytes:
    """``extensions``: (header type, body) pairs placed before the UDP header, in order."""
    body = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload if udp else payload
    chain = b""
    types = [kind for kind, _ in extensions] + [17]
    for (kind, ext_body), following in zip(extensions, types[1:], strict=True):
        if kind == 44:
            chain += bytes([following, 0]) + ext_body
        else:
            padded = ext_body + bytes(-(len(ext_body) + 2) % 8)
            chain += bytes([following, (len(padded) + 2) // 8 - 1]) + padded
    header = struct.pack(
        "!IHBB16s16s",
        6 << 28,
        len(chain) + len(body),
        types[0],
        64,
        socket.inet_pton(socket.AF_INET6, src),
        socket.inet_pton(socket.AF_INET6, dst),
    )
    return header + chain + body


def ethernet(packet: bytes, ethertype=0x0800, vlans=()) -> bytes:
    tags = b"".join(struct.pack("!HH", tpid, vid) for tpid, vid in vlans)
    return bytes(12) + tags + struct.pack("!H", ethertype) + packet


def classic(records, *, link_type=LINKTYPE_ETHERNET, order="<", nanos=True, snaplen=65535) -> bytes:
    """records: (ts_ns, packet bytes[, origlen]) tuples."""
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link_type)
    for ts_ns, data, *origlen in records:
        seconds, rest = divmod(ts_ns, 1_000_000_000)
        fraction = rest if nanos else rest // 1000
        out += (
            struct.pack(order + "IIII", seconds, fraction, len(data), origlen[0] if origlen else len(data))
            + data
        )
    return out


def block(kind: int, body: bytes, order="<") -> bytes:
    body += bytes(-len(body) % 4)
    length = 12 + len(body)
    return struct.pack(order + "II", kind, length) + body + struct.pack(order + "I", length)


def option(code: int, value: bytes, order="<") -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def shb(order="<") -> bytes:
    return block(0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1), order)


def idb(
    link_type: int, *, snaplen=0, tsresol: int | None = None, tsoffset: int | None = None, order="<"
) -> bytes:
    options = b""
    if tsresol is not None:
        options += option(9, bytes([tsresol]), order)
    if tsoffset is not None:
        options += option(14, struct.pack(order + "q", tsoffset), order)
    if options:
        options += option(0, b"", order)
    return block(1, struct.pack(order + "HHI", link_type, 0, snaplen) + options, order)


def epb(interface: int, ts_units: int, data: bytes, *, origlen=None, order="<") -> bytes:
    body = struct.pack(
        order + "IIIII",
        interface,
        ts_units >> 32,
        ts_units & 0xFFFFFFFF,
        len(data),
        len(data) if origlen is None else origlen,
    )
    return block(6, body + data, order)


def spb(data: bytes, order="<") -> bytes:
    return block(3, struct.pack(order + "I", len(data)) + data, order)


def opb(interface: int, ts_units: int, data: bytes, order="<") -> bytes:
    body = struct.pack(
        order + "HHIIII", interface, 0, ts_units >> 32, ts_units & 0xFFFFFFFF, len(data), len(data)
    )
    return block(2, body + data, order)


def read(data: bytes) -> tuple[list, PcapReader]:
    """The packets of ``data``, one by one; and, checked on the way, that `PcapReader.columns` reads
    the same packets with the same problems and counts (every capture built here is read both ways)."""
    reader = PcapReader(data, source="test.pcap")
    packets = list(reader.packets())
    assert_columns_read_the_same(data, packets, reader)
    return packets, reader


def assert_columns_read_the_same(data: bytes, packets: list, reader: PcapReader) -> None:
    columnar = PcapReader(data, source="test.pcap")
    rows = list(columnar.columns().packets())
    assert [_packet_values(p) for p in rows] == [_packet_values(p) for p in packets]
    assert [(str(e), e.offset) for e in columnar.problems] == [(str(e), e.offset) for e in reader.problems]
    assert (columnar.skipped, columnar.truncated, columnar.packet_count, columnar.udp_count, columnar.interfaces,
            columnar.unreachable) == (reader.skipped, reader.truncated, reader.packet_count, reader.udp_count,
                                      reader.interfaces, reader.unreachable)


def _packet_values(packet) -> tuple:
    return (*packet[:6], bytes(packet.payload), *packet[7:])


def test_icmp_port_unreachable_answers_are_kept_in_file_order_by_packets_and_by_columns():
    """ICMP and ICMPv6 port unreachable quoting a UDP datagram, among UDP datagrams and other ICMP, over
    Ethernet and raw IP: `columns` (whose common layout is UDP only) keeps the same evidence, in file
    order, as `packets`, and counts the same."""
    quoted4 = ipv4(b"", src="10.0.0.2", dst="10.0.0.1", sport=41000, dport=20003)[:28]
    quoted6 = ipv6(b"", src="fd00::2", dst="fd00::1", sport=41001, dport=20103)[:48]
    unreachable4 = ipv4(struct.pack("!BBHI", 3, 3, 0, 0) + quoted4, src="10.0.0.1", dst="10.0.0.2", proto=1,
                        udp=False)
    echo4 = ipv4(struct.pack("!BBHI", 8, 0, 0, 0), proto=1, udp=False)  # not an unreachable: only counted
    header6 = struct.pack("!IHBB16s16s", 6 << 28, 8 + len(quoted6), 58, 64, socket.inet_pton(socket.AF_INET6, "fd00::1"),
                          socket.inet_pton(socket.AF_INET6, "fd00::2"))
    unreachable6 = header6 + struct.pack("!BBHI", 1, 4, 0, 0) + quoted6
    for link_type, wrap in ((LINKTYPE_ETHERNET, ethernet), (LINKTYPE_RAW, lambda packet: packet)):
        records = [(TS, wrap(ipv4(PAYLOAD))), (TS + 1, wrap(unreachable4)), (TS + 2, wrap(echo4)),
                   (TS + 3, wrap(ipv4(PAYLOAD, sport=2))), (TS + 4, wrap(unreachable4))]
        if link_type == LINKTYPE_RAW:
            records.append((TS + 5, unreachable6))
        packets, reader = read(classic(records, link_type=link_type))
        assert len(packets) == 2
        assert [(u.index, u.ts_ns, u.src_ip, u.src_port, u.dst_ip, u.dst_port) for u in reader.unreachable] == [
            (2, TS + 1, "10.0.0.2", 41000, "10.0.0.1", 20003), (5, TS + 4, "10.0.0.2", 41000, "10.0.0.1", 20003),
        ] + ([(6, TS + 5, "fd00::2", 41001, "fd00::1", 20103)] if link_type == LINKTYPE_RAW else [])
        assert reader.skipped["ICMP port unreachable (kept as evidence)"] == (3 if link_type == LINKTYPE_RAW else 2)
        assert reader.skipped["not UDP (IP protocol 1)"] == 1


# --- The real capture ----------------------------------------------------------------------------
def test_the_real_pcap_and_pcapng_yield_the_same_udp_packets(capture):
    from_pcap, pcap_reader = read((capture / "capture.pcap").read_bytes())
    from_pcapng, pcapng_reader = read((capture / "capture.pcapng").read_bytes())
    assert len(from_pcap) == len(from_pcapng) == 2057
    for a, b in zip(from_pcap, from_pcapng, strict=True):
        assert (a.index, a.ts_ns, a.src_ip, a.src_port, a.dst_ip, a.dst_port) == (
            b.index,
            b.ts_ns,
            b.src_ip,
            b.src_port,
            b.dst_ip,
            b.dst_port,
        )
        assert bytes(a.payload) == bytes(b.payload)
    for reader in (pcap_reader, pcapng_reader):
        assert reader.problems == [] and not reader.truncated and sum(reader.skipped.values()) == 0


def test_packet_numbers_times_and_ports_match_wiresharks_view_of_the_real_capture(capture):
    packets, _ = read((capture / "capture.pcap").read_bytes())
    lines = (capture / "capture-wireshark-aeron-frames.tsv").read_text().splitlines()[1:]
    for packet, line in zip(packets, lines, strict=True):
        number, epoch, sport, dport, udp_length = line.split("\t")[:5]
        seconds, fraction = epoch.split(".")
        assert packet.index == int(number)
        assert packet.ts_ns == int(seconds) * 1_000_000_000 + int(fraction.ljust(9, "0")[:9])
        assert (packet.src_port, packet.dst_port) == (int(sport), int(dport))
        assert len(packet.payload) + 8 == int(udp_length)
        assert packet.src_ip == packet.dst_ip == "127.0.0.1"
    data = (capture / "capture.pcap").read_bytes()
    first = packets[0]
    assert data[first.payload_offset : first.payload_offset + len(first.payload)] == bytes(first.payload)


# --- Classic pcap variants -----------------------------------------------------------------------
@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nanos", [True, False])
def test_classic_pcap_in_either_byte_order_and_resolution_gives_the_same_packet(order, nanos):
    data = classic([(TS, ethernet(ipv4(PAYLOAD)))], order=order, nanos=nanos)
    (packet,), reader = read(data)
    assert packet.ts_ns == (TS if nanos else TS // 1000 * 1000)
    assert (packet.src_ip, packet.src_port, packet.dst_ip, packet.dst_port) == (
        "10.0.0.1",
        40000,
        "10.0.0.2",
        20103,
    )
    assert bytes(packet.payload) == PAYLOAD
    assert (packet.index, packet.file_offset, packet.interface_id) == (1, 24, 0)
    assert reader.format == "pcap" and reader.problems == []


@pytest.mark.parametrize("order", ["<", ">"])
def test_classic_pcap_records_at_every_byte_alignment_are_walked_the_same_in_either_byte_order(order):
    """Records of odd lengths put the next record's header at each of the four byte alignments (the walk
    reads a caplen from the alignment's own view of the file), then a cut-off record ends the file."""
    records = [(TS + k, ethernet(ipv4(bytes(range(k % 7 + 1)), sport=k))) for k in range(12)]
    data = classic(records, order=order)
    packets, reader = read(data)
    assert [bytes(p.payload) for p in packets] == [bytes(range(k % 7 + 1)) for k in range(12)]
    assert sorted({p.file_offset % 4 for p in packets}) == [0, 1, 2, 3]
    cut, cut_reader = read(data[:-3])
    assert len(cut) == 11 and cut_reader.truncated


@pytest.mark.parametrize(
    ("link_type", "frame"),
    [
        (LINKTYPE_ETHERNET, ethernet(ipv4(PAYLOAD))),
        (LINKTYPE_ETHERNET, ethernet(ipv4(PAYLOAD), vlans=[(0x8100, 5)])),
        (LINKTYPE_ETHERNET, ethernet(ipv4(PAYLOAD), vlans=[(0x88A8, 5), (0x8100, 6)])),
        (LINKTYPE_ETHERNET, ethernet(ipv6(PAYLOAD), ethertype=0x86DD)),
        (LINKTYPE_LINUX_SLL, struct.pack("!HHH8sH", 0, 772, 6, bytes(8), 0x0800) + ipv4(PAYLOAD)),
        (LINKTYPE_LINUX_SLL2, struct.pack("!HHIHBB8s", 0x86DD, 0, 1, 772, 0, 6, bytes(8)) + ipv6(PAYLOAD)),
        (LINKTYPE_NULL, struct.pack("<I", 2) + ipv4(PAYLOAD)),
        (LINKTYPE_NULL, struct.pack(">I", 2) + ipv4(PAYLOAD)),
        (LINKTYPE_NULL, struct.pack("<I", 30) + ipv6(PAYLOAD)),
        (LINKTYPE_LOOP, struct.pack(">I", 24) + ipv6(PAYLOAD)),
        (LINKTYPE_LOOP, struct.pack(">I", 2) + ipv4(PAYLOAD)),
        (LINKTYPE_RAW, ipv4(PAYLOAD)),
        (LINKTYPE_RAW, ipv6(PAYLOAD)),
        (LINKTYPE_IPV4, ipv4(PAYLOAD)),
        (LINKTYPE_IPV6, ipv6(PAYLOAD)),
    ],
)
def test_every_supported_link_type_yields_the_udp_payload(link_type, frame):
    (packet,), reader = read(classic([(TS, frame)], link_type=link_type))
    assert bytes(packet.payload) == PAYLOAD and packet.dst_port == 20103
    assert packet.src_ip in ("10.0.0.1", "fd00::1")
    assert reader.problems == []


@pytest.mark.parametrize(
    ("link_type", "frame"),
    [
        (LINKTYPE_ETHERNET, ethernet(ipv4(PAYLOAD))),
        (LINKTYPE_LINUX_SLL, struct.pack("!HHH8sH", 0, 772, 6, bytes(8), 0x0800) + ipv4(PAYLOAD)),
        (LINKTYPE_LINUX_SLL2, struct.pack("!HHIHBB8s", 0x0800, 0, 1, 772, 0, 6, bytes(8)) + ipv4(PAYLOAD)),
        (LINKTYPE_NULL, struct.pack("<I", 2) + ipv4(PAYLOAD)),
        (LINKTYPE_NULL, struct.pack(">I", 2) + ipv4(PAYLOAD)),
        (LINKTYPE_LOOP, struct.pack(">I", 2) + ipv4(PAYLOAD)),
        (LINKTYPE_RAW, ipv4(PAYLOAD)),
        (LINKTYPE_IPV4, ipv4(PAYLOAD)),
    ],
)
def test_plain_ipv4_udp_over_the_common_link_types_is_read_as_columns_without_a_packet_at_a_time(
        link_type, frame, monkeypatch):
    data = classic([(TS + i, frame) for i in range(3)], link_type=link_type)
    packets, _ = read(data)
    monkeypatch.setattr(PcapReader, "_dissect", lambda *args: pytest.fail("read one packet at a time"))
    columns = PcapReader(data).columns()
    assert [_packet_values(columns.packet(row)) for row in range(len(columns))] == [_packet_values(p) for p in packets]


def test_ipv4_options_and_ipv6_extension_headers_are_stepped_over():
    with_options = ipv4(PAYLOAD, options=b"\x94\x04\x00\x00")  # router alert
    with_extensions = ipv6(PAYLOAD, extensions=[(0, b"\x01\x04\x00\x00\x00\x00"), (60, b"\x01\x02\x00\x00")])
    packets, reader = read(classic([(TS, with_options), (TS + 1, with_extensions)], link_type=LINKTYPE_RAW))
    assert [bytes(p.payload) for p in packets] == [PAYLOAD, PAYLOAD]
    assert reader.problems == []


def test_traffic_that_is_not_udp_is_skipped_and_counted():
    tcp = ipv4(b"\x00" * 20, proto=6, udp=False)
    arp = ethernet(bytes(28), ethertype=0x0806)
    icmp6 = ipv6(b"\x80\x00\x00\x00", udp=False)
    icmp6 = icmp6[:6] + bytes([58]) + icmp6[7:]
    data = classic(
        [
            (TS, ethernet(tcp)),
            (TS, arp),
            (TS, ethernet(icmp6, ethertype=0x86DD)),
            (TS, ethernet(ipv4(PAYLOAD))),
        ]
    )
    packets, reader = read(data)
    assert [p.index for p in packets] == [4]  # packet numbers count every record, as Wireshark does
    assert reader.skipped == {
        "not UDP (IP protocol 6)": 1,
        "not IP (ethertype 0x0806)": 1,
        "not UDP (IPv6 next header 58)": 1,
    }
    assert reader.problems == [] and reader.packet_count == 4 and reader.udp_count == 1


def test_an_unsupported_link_type_is_reported_once_and_its_packets_skipped():
    packets, reader = read(classic([(TS, b"\x00" * 40)] * 3, link_type=105))
    assert packets == [] and reader.skipped == {"link type 105 not supported": 3}
    assert len(reader.problems) == 1 and "105" in str(reader.problems[0])


def test_ip_fragments_are_reassembled_into_one_datagram_even_out_of_order():
    big = bytes(range(256)) * 12
    whole = ipv4(big, ident=77)
    header, body = whole[:20], whole[20:]

    def fragment(offset, chunk, more):
        flags = (0x2000 if more else 0) | (offset // 8)
        return (
            struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(chunk), 77, flags, 64, 17, 0) + header[12:20] + chunk
        )

    parts = [
        fragment(0, body[:1480], True),
        fragment(1480, body[1480:2960], True),
        fragment(2960, body[2960:], False),
    ]
    packets, reader = read(
        classic([(TS, parts[2]), (TS + 1, parts[0]), (TS + 2, parts[1])], link_type=LINKTYPE_RAW)
    )
    (packet,) = packets
    assert bytes(packet.payload) == big and packet.index == 3 and packet.payload_offset is None
    assert reader.problems == []


def test_ipv6_fragments_are_reassembled():
    big = bytes(range(200)) * 10
    udp = struct.pack("!HHHH", 1, 20103, 8 + len(big), 0) + big
    first = ipv6(udp[:1000], extensions=[(44, struct.pack("!HI", 0x0001, 9))], udp=False)
    second = ipv6(udp[1000:], extensions=[(44, struct.pack("!HI", (1000 // 8) << 3, 9))], udp=False)
    packets, reader = read(classic([(TS, first), (TS + 1, second)], link_type=LINKTYPE_RAW))
    assert [bytes(p.payload) for p in packets] == [big] and reader.problems == []


def test_fragments_that_never_complete_are_reported_after_the_last_packet():
    first = ipv4(bytes(2000))[: 20 + 1480]
    first = first[:2] + struct.pack("!H", 1500) + first[4:6] + struct.pack("!H", 0x2000) + first[8:]
    packets, reader = read(classic([(TS, first)], link_type=LINKTYPE_RAW))
    assert packets == [] and reader.skipped == {"incomplete IP fragments": 1}
    assert "never completed" in str(reader.problems[0]) and reader.problems[0].offset == 24


def test_a_packet_cut_by_the_snaplen_is_reported_not_decoded():
    frame = ethernet(ipv4(PAYLOAD))
    data = classic([(TS, frame[:50], len(frame)), (TS, frame)], snaplen=50)
    packets, reader = read(data)
    assert [p.index for p in packets] == [2]
    (problem,) = reader.problems
    assert "packet 1" in str(problem) and "snaplen" in str(problem) and problem.offset == 24
    assert reader.skipped == {"cut by snaplen": 1}


def test_a_packet_cut_only_in_its_link_trailer_is_still_whole():
    frame = ethernet(ipv4(PAYLOAD)) + b"\x00" * 4  # an Ethernet FCS the capture did not keep
    (packet,), reader = read(classic([(TS, frame[:-4], len(frame))]))
    assert bytes(packet.payload) == PAYLOAD and reader.problems == []


def test_a_truncated_file_yields_every_whole_packet_then_says_where_it_ends():
    records = [(TS + i, ethernet(ipv4(PAYLOAD, sport=i))) for i in range(1, 4)]
    data = classic(records)
    record_length = 16 + len(records[0][1])
    for cut in range(24, len(data)):
        packets, reader = read(data[:cut])
        whole = (cut - 24) // record_length
        assert [p.src_port for p in packets] == list(range(1, whole + 1))
        if (cut - 24) % record_length:
            assert reader.truncated
            assert reader.problems[-1].offset == 24 + whole * record_length
            assert "cut short" in str(reader.problems[-1])
        else:
            assert not reader.truncated and reader.problems == []


def test_iter_packets_raises_the_problem_only_after_yielding_what_was_readable():
    data = classic([(TS, ethernet(ipv4(PAYLOAD)))] * 2)[:-5]
    seen = []
    with pytest.raises(DecodeError) as error:
        for packet in iter_packets(data, source="cut.pcap"):
            seen.append(packet)
    assert len(seen) == 1
    assert str(error.value).startswith("cut.pcap, offset ")


def test_a_corrupt_record_length_stops_reading_instead_of_swallowing_later_records():
    data = bytearray(classic([(TS, ethernet(ipv4(PAYLOAD)))] * 3))
    data[24 + 8 : 24 + 12] = struct.pack("<I", 10**7)
    packets, reader = read(bytes(data))
    assert packets == [] and reader.truncated and "corrupt" in str(reader.problems[0])


@pytest.mark.parametrize("data", [b"", b"\x00\x01", b"GIF89a" + bytes(30), bytes(24)])
def test_a_file_that_is_not_a_capture_is_refused_at_once(data):
    with pytest.raises(DecodeError) as error:
        PcapReader(data, source="x.bin")
    assert error.value.offset == 0 and str(error.value).startswith("x.bin")


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_damaged_captures_never_raise_while_reading(data):
    good = classic(
        [(TS + i, ethernet(ipv4(PAYLOAD, sport=i))) for i in range(3)]
        + [(TS, ethernet(ipv6(PAYLOAD), ethertype=0x86DD))]
    )
    if data.draw(st.booleans()):
        good = (
            shb() + idb(LINKTYPE_ETHERNET) + epb(0, 5, ethernet(ipv4(PAYLOAD))) + spb(ethernet(ipv4(PAYLOAD)))
        )
    damaged = bytearray(good)
    for _ in range(data.draw(st.integers(1, 6))):
        damaged[data.draw(st.integers(4, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    damaged = damaged[: data.draw(st.integers(4, len(damaged)))]
    packets, reader = read(bytes(damaged))
    assert all(isinstance(bytes(p.payload), bytes) for p in packets)
    assert all(isinstance(problem, DecodeError) for problem in reader.problems)


@pytest.mark.parametrize("segment", [pcap_module.SEGMENT_BYTES, 700])
def test_columns_read_the_fuzzers_mutations_of_the_real_captures_as_packets_does(segment, monkeypatch):
    """The mutation fuzzer's inputs (real and sample captures, bit flips, cuts, splices, ...): the
    columnar reading gives the same packets, problems and counts as the packet-at-a-time one, whether
    a classic pcap is read in one stretch or in stretches of a few records (a cut, a damaged record,
    an IP fragment falling in a later stretch than the one it completes)."""
    from tests.fuzzing import make_input

    monkeypatch.setattr(pcap_module, "SEGMENT_BYTES", segment)
    for index in range(300 if segment == pcap_module.SEGMENT_BYTES else 150):
        data = make_input("pcap", 13, index)
        try:
            reader = PcapReader(data, source="test.pcap")
        except DecodeError:
            continue
        assert_columns_read_the_same(data, list(reader.packets()), reader)


def _columns_and_report(data: bytes) -> tuple:
    """Everything `PcapReader.columns` gives for ``data``: each column's type and bytes, and the reader's
    problems and counts."""
    reader = PcapReader(data, source="test.pcap")
    columns = reader.columns()
    arrays = {name: (str(getattr(columns, name).dtype), getattr(columns, name).tobytes())
              for name in ("index", "ts_ns", "src", "src_port", "dst", "dst_port", "payload_offset", "payload_length",
                           "file_offset", "interface_id", "caplen", "origlen")}
    return (arrays, columns.has_ts is None, columns.addresses, {row: bytes(p) for row, p in columns.loose.items()},
            [(str(e), e.offset) for e in reader.problems], reader.skipped, reader.truncated, reader.packet_count,
            reader.udp_count, reader.unreachable)


_ETHERNET_RECORDS = st.sampled_from([
    ethernet(ipv4(PAYLOAD)),
    ethernet(ipv4(PAYLOAD, src="10.0.0.3", dst="0.0.0.0", sport=1, dport=65535)),
    ethernet(ipv4(PAYLOAD + b"xyz", src="255.255.255.255", dst="10.0.0.1")),
    ethernet(ipv4(PAYLOAD, options=b"\x01" * 4)),  # IPv4 options: one at a time
    ethernet(ipv4(PAYLOAD, fragment=0x2000, ident=9)),  # a first fragment (never completed)
    ethernet(ipv4(PAYLOAD, fragment=0x4000)),  # don't fragment: a whole datagram
    ethernet(ipv4(PAYLOAD, proto=6)),  # TCP
    ethernet(ipv4(PAYLOAD), ethertype=0x0806),
    ethernet(ipv4(PAYLOAD), vlans=[(0x8100, 5)]),
    ethernet(ipv6(PAYLOAD), ethertype=0x86DD),
    ethernet(ipv4(b"", udp=False) + bytes(8)),  # an IP total length with no room for the UDP header
    ethernet(ipv4(PAYLOAD)[:24] + struct.pack("!H", 7) + ipv4(PAYLOAD)[26:]),  # UDP length below 8
    ethernet(ipv4(PAYLOAD)[:24] + struct.pack("!H", 4000) + ipv4(PAYLOAD)[26:]),  # UDP length past the datagram
    ethernet(ipv4(PAYLOAD)[:2] + struct.pack("!H", 4000) + ipv4(PAYLOAD)[4:]),  # IP length past the record
    ethernet(ipv4(PAYLOAD)) + bytes(7),  # a link trailer
])


@settings(max_examples=60, deadline=None)
@given(st.lists(_ETHERNET_RECORDS, min_size=1, max_size=12), st.sampled_from([LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL]),
       st.sampled_from(["<", ">"]), st.integers(0, 3))
def test_ethernet_and_sll_records_are_tested_in_one_gather_as_the_general_way_tests_them_in_steps(
        frames, link_type, order, cut):
    """A classic pcap over Ethernet or SLL whose records are all long enough for an IPv4 and UDP header
    has its ethertype, IPv4 and UDP fields read in one gather and tested at once (`_fast_rows`): the same
    columns (values and types), problems and counts as the general way (`_ipv4_udp_rows`, link test
    first), for every mix of datagrams in the common layout and others, and when the file is cut in its
    last record."""
    if link_type == LINKTYPE_LINUX_SLL:  # SLL's 16-byte header ends in the same ethertype
        frames = [struct.pack("!HHH8s", 0, 772, 6, bytes(8)) + frame[12:] for frame in frames]
    data = classic([(TS + i, frame) for i, frame in enumerate(frames)], link_type=link_type, order=order)
    data = data[:len(data) - cut]
    general = pcap_module.PcapReader._ipv4_udp_rows
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pcap_module.PcapReader, "_ipv4_udp_rows",
                      lambda self, *args: calls.append(1) or general(self, *args))
        one_gather = _columns_and_report(data)
        assert not calls or cut  # the one gather, unless the last record was cut short
        patch.setattr(pcap_module, "_LINK_HEADERS", {})  # no link is known to have an ethertype
        assert _columns_and_report(data) == one_gather
        assert calls


def test_stretches_joined_are_the_columns_concatenated_each_with_its_widest_type():
    """`PacketColumns.joined` makes each column as `np.concatenate` does (values and type: a stretch whose
    lengths did not fit 32 bits makes the whole column 64-bit), each contiguous and aligned, empty
    stretches and times missing in one stretch included."""
    import numpy as np

    from formats.pcap import PacketColumns

    names = ("index", "ts_ns", "src", "src_port", "dst", "dst_port", "payload_offset", "payload_length",
             "file_offset", "interface_id", "caplen", "origlen")
    rng = np.random.default_rng(7)

    def part(rows: int, wide: tuple = (), has_ts=None) -> PacketColumns:
        arrays = {name: rng.integers(-(1 << 40) if name in wide or name in ("index", "ts_ns", "payload_offset",
                                                                          "file_offset") else -1000, 1 << 30,
                                     rows).astype(np.int64 if name in wide or name in ("index", "ts_ns",
                                                                                       "payload_offset",
                                                                                       "file_offset")
                                                  else np.int32) for name in names}
        return PacketColumns(**arrays, has_ts=has_ts, addresses=["10.0.0.1"], data=memoryview(b""))

    parts = [part(6), part(0), part(3, wide=("caplen",)), part(4, has_ts=np.array([True, False, True, True])),
             part(0, wide=("origlen",))]
    joined = PacketColumns.joined(parts, ["10.0.0.1"], memoryview(b""))
    for name in names:
        expected = np.concatenate([getattr(p, name) for p in parts])
        column = getattr(joined, name)
        assert column.dtype == expected.dtype and column.tolist() == expected.tolist()
        assert column.flags.c_contiguous and column.flags.writeable and column.flags.aligned
    assert joined.caplen.dtype == np.int64 and joined.origlen.dtype == np.int64 and joined.src.dtype == np.int32
    assert joined.has_ts.tolist() == [True] * 9 + [True, False, True, True]
    empty = PacketColumns.joined([part(0), part(0)], [], memoryview(b""))
    assert all(len(getattr(empty, name)) == 0 for name in names) and empty.has_ts is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0, 1, 0x0A000001, 0x0A000002, 0x7F000001, 0xC0A80001, 0xFFFFFFFE,
                                          0xFFFFFFFF]), max_size=20), min_size=1, max_size=5))
def test_ipv4_addresses_get_one_number_each_whatever_order_they_come_in(batches):
    """`_AddressBook.ipv4_ids` numbers IPv4 addresses (looked up among those seen, by binary search, the
    lowest and highest addresses and those beyond every address seen so far included): each batch's
    numbers name its addresses, and an address keeps its number."""
    import numpy as np

    book = pcap_module._AddressBook()
    numbers: dict[int, int] = {}
    for batch in batches:
        ids = book.ipv4_ids(np.array(batch, dtype=">u4"))
        assert ids.dtype == np.int32 and len(ids) == len(batch)
        for address, number in zip(batch, ids.tolist(), strict=True):
            assert book.names[number] == socket.inet_ntoa(address.to_bytes(4, "big"))
            assert numbers.setdefault(address, number) == number
    assert len(book.names) == len(numbers)


# --- pcapng --------------------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_with_two_interfaces_of_different_link_types_and_resolutions(order):
    data = (
        shb(order)
        + idb(LINKTYPE_ETHERNET, tsresol=9, order=order)  # ns
        + idb(LINKTYPE_RAW, tsresol=0x80 | 20, tsoffset=100, order=order)  # 2^-20 s, +100 s
        + block(4, b"\x00\x00\x00\x00", order)  # name resolution: skipped
        + epb(0, TS, ethernet(ipv4(PAYLOAD)), order=order)
        + block(5, struct.pack(order + "IIIq", 0, 0, 0, 0), order)  # interface statistics: skipped
        + epb(1, 3 << 20, ipv6(PAYLOAD, dport=1), order=order)
        + block(0x00000BAD, b"\x00\x00\x7f\xff" + b"custom", order)  # custom: skipped
        + block(0x0000FFF0, b"future", order)  # unknown: skipped
    )
    (first, second), reader = read(data)
    assert reader.format == "pcapng" and reader.problems == []
    assert (first.ts_ns, first.interface_id, first.src_ip) == (TS, 0, "10.0.0.1")
    assert (second.ts_ns, second.interface_id, second.src_ip, second.dst_port) == (
        103_000_000_000,
        1,
        "fd00::1",
        1,
    )
    assert [first.index, second.index] == [1, 2]


def test_pcapng_default_resolution_is_microseconds_and_simple_and_obsolete_blocks_are_read():
    data = (
        shb()
        + idb(LINKTYPE_ETHERNET, snaplen=65535)
        + spb(ethernet(ipv4(PAYLOAD, sport=1)))
        + opb(0, 1_500_000, ethernet(ipv4(PAYLOAD, sport=2)))
        + epb(0, 2_000_000, ethernet(ipv4(PAYLOAD, sport=3)))
    )
    packets, reader = read(data)
    assert [(p.src_port, p.ts_ns) for p in packets] == [(1, None), (2, 1_500_000_000), (3, 2_000_000_000)]
    assert reader.problems == []


def test_pcapng_interface_ids_restart_with_each_section():
    data = (
        shb()
        + idb(LINKTYPE_RAW)
        + epb(0, 1, ipv4(PAYLOAD, sport=1))
        + shb(">")
        + idb(LINKTYPE_ETHERNET, order=">")
        + epb(0, 2, ethernet(ipv4(PAYLOAD, sport=2)), order=">")
    )
    packets, reader = read(data)
    assert [p.src_port for p in packets] == [1, 2] and reader.problems == []


def test_pcapng_packet_for_an_undescribed_interface_is_reported_and_reading_goes_on():
    data = shb() + idb(LINKTYPE_RAW) + epb(3, 1, ipv4(PAYLOAD)) + epb(0, 1, ipv4(PAYLOAD, sport=9))
    packets, reader = read(data)
    assert [p.src_port for p in packets] == [9]
    assert "interface 3" in str(reader.problems[0]) and "packet 1" in str(reader.problems[0])


def test_a_truncated_pcapng_keeps_the_whole_blocks():
    data = shb() + idb(LINKTYPE_RAW) + epb(0, 1, ipv4(PAYLOAD, sport=1)) + epb(0, 2, ipv4(PAYLOAD, sport=2))
    packets, reader = read(data[:-10])
    assert [p.src_port for p in packets] == [1] and reader.truncated
    assert "packet 2" in str(reader.problems[-1])


def test_a_pcapng_block_with_a_wrong_trailing_length_is_corrupt():
    data = bytearray(shb() + idb(LINKTYPE_RAW) + epb(0, 1, ipv4(PAYLOAD)))
    data[-4:] = struct.pack("<I", 8)
    packets, reader = read(bytes(data))
    assert packets == [] and reader.truncated and "corrupt" in str(reader.problems[0])


# --- Writing -------------------------------------------------------------------------------------
def _checksum_ok(data: bytes) -> bool:
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


@pytest.mark.parametrize("link_type", [LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_IPV4])
def test_written_captures_read_back_with_valid_ip_and_udp_checksums(link_type):
    writer = PcapWriter(link_type=link_type)
    data = writer.file_header() + writer.udp_packet(TS, "10.1.2.3", 5, "10.1.2.4", 6, PAYLOAD + b"x")
    data += writer.udp_packet(TS + 7, "10.1.2.4", 6, "10.1.2.3", 5, b"")
    (first, second), reader = read(data)
    assert (first.ts_ns, first.src_ip, first.src_port, first.dst_ip, first.dst_port) == (
        TS,
        "10.1.2.3",
        5,
        "10.1.2.4",
        6,
    )
    assert bytes(first.payload) == PAYLOAD + b"x" and bytes(second.payload) == b"" and second.ts_ns == TS + 7
    ip_start = first.file_offset + 16 + (14 if link_type == LINKTYPE_ETHERNET else 0)
    ip_header = data[ip_start : ip_start + 20]
    assert _checksum_ok(ip_header)
    udp = data[ip_start + 20 : first.payload_offset + len(first.payload)]
    assert _checksum_ok(ip_header[12:20] + b"\x00\x11" + struct.pack("!H", len(udp)) + udp)


def test_writing_is_deterministic():
    def build():
        writer = PcapWriter()
        return writer.file_header() + b"".join(
            writer.udp_packet(TS + i, "127.0.0.1", 1000 + i, "127.0.0.1", 20003, PAYLOAD) for i in range(5)
        )

    assert build() == build()


def _every_frame_kind() -> list[list]:
    message = fragment_message(bytes(range(256)) * 8, session_id=7, stream_id=108, term_id=-5, term_offset=0)
    return [
        [
            SetupFrame(
                term_offset=0,
                session_id=7,
                stream_id=108,
                initial_term_id=-5,
                active_term_id=-5,
                term_length=65536,
                mtu=1408,
            )
        ],
        [
            StatusMessage(
                session_id=7,
                stream_id=108,
                consumption_term_id=-5,
                consumption_term_offset=0,
                receiver_window=131072,
                receiver_id=99,
            )
        ],
        [
            StatusMessage(
                session_id=7,
                stream_id=108,
                consumption_term_id=-5,
                consumption_term_offset=0,
                receiver_window=131072,
                receiver_id=99,
                group_tag=3,
            )
        ],
        *[[frame] for frame in message],
        [
            data_frame(session_id=7, stream_id=108, term_id=-5, term_offset=2112, payload=b"abc"),
            data_frame(session_id=7, stream_id=108, term_id=-5, term_offset=2176, payload=b"defgh"),
        ],
        [heartbeat(session_id=7, stream_id=108, term_id=-5, term_offset=2240)],
        [heartbeat(session_id=7, stream_id=108, term_id=-5, term_offset=2240, end_of_stream=True)],
        [
            PadFrame(
                frame_length=65536 - 2240, flags=0, term_offset=2240, session_id=7, stream_id=108, term_id=-5
            )
        ],
        [Nak(session_id=7, stream_id=108, term_id=-5, term_offset=0, length=1408)],
        [Rttm(session_id=7, stream_id=108, echo_timestamp_ns=123, reception_delta=4, receiver_id=99)],
    ]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_tshark_decodes_every_frame_we_write_without_malformed_or_warning_marks(tmp_path):
    writer = PcapWriter()
    datagrams = [encode_datagram(frames) for frames in _every_frame_kind()]
    data = writer.file_header() + b"".join(
        writer.udp_packet(TS + i * 1000, "10.0.0.1", 40000, "10.0.0.2", 20103, d)
        for i, d in enumerate(datagrams)
    )
    path = tmp_path / "written.pcap"
    path.write_bytes(data)
    base = ["tshark", "-n", "-r", str(path), "-d", "udp.port==20103,aeron"]
    bad = subprocess.run(
        [
            *base,
            "-Y",
            "_ws.malformed || _ws.expert.severity >= 6291456",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert bad.stdout.strip() == ""
    decoded = subprocess.run(
        [
            *base,
            "-T",
            "fields",
            "-E",
            "occurrence=f",
            "-e",
            "frame.number",
            "-e",
            "aeron.data.term_offset",
            "-e",
            "aeron.data.frame_length",
            "-e",
            "aeron.data.flags",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    rows = [line.split("\t") for line in decoded.stdout.splitlines()]
    assert len(rows) == len(datagrams)
    for row, datagram in zip(rows, datagrams, strict=True):
        first = decode_datagram(datagram)[0]
        if row[1]:  # tshark lists DATA frames (not B|E heartbeats) under aeron.data.*
            assert (int(row[1]), int(row[2]), int(row[3], 16)) == (
                first.term_offset,
                first.frame_length,
                first.flags,
            )


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nanos", [True, False])
def test_the_record_walk_in_small_stretches_reads_odd_and_cut_captures_as_one_packet_at_a_time(
        monkeypatch, order, nanos):
    """`PcapReader.columns` walks a classic pcap's record headers a stretch at a time (`SEGMENT_BYTES`),
    each record's length read from the file as one of four word views, or ``struct`` in the other byte
    order: records of every length mod 4 (each alignment of the next header), non-UDP records between
    them, a corrupt length, and the file cut at every byte of its last records are read as `packets`
    reads them, whatever the stretch's size."""
    records = []
    for i in range(1, 13):
        payload = PAYLOAD + bytes(i % 4)  # every alignment of the record after it
        records.append((TS + i * 1000, ethernet(ipv4(payload, sport=i))))
        if i % 5 == 0:
            records.append((TS + i * 1000 + 1, ethernet(b"\x00" * (20 + i), ethertype=0x86DD)))  # not UDP/IPv4
    data = classic(records, order=order, nanos=nanos)
    corrupt = bytearray(data)
    at = 24 + sum(16 + len(r[1]) for r in records[:7])
    corrupt[at + 8:at + 12] = struct.pack(order + "I", 10**7)  # a record header claiming 10 MB
    for segment in (1, 16, 100, 1 << 22):
        monkeypatch.setattr(pcap_module, "SEGMENT_BYTES", segment)
        packets, reader = read(data)  # (`read` checks `columns` against `packets`)
        assert [p.src_port for p in packets] == list(range(1, 13)) and not reader.truncated
        packets, reader = read(bytes(corrupt))
        assert reader.truncated and len(packets) < 12
        for cut in range(len(data) - 3 * (16 + len(records[-1][1])), len(data)):
            read(data[:cut])
