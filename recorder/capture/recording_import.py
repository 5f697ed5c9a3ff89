"""`recount record` recordings as capture input.

A recording (`recording.arrows`, an Arrow IPC stream whose schema metadata says
``recount.format = recording``) holds every datagram the proxy forwarded, with its receive time and
the ORIGINAL endpoints, as a pcap taken on the wire would show them.  To make "a recording converts
into the same replay file a pcap of the same traffic would give" true by construction rather than
by a second decoder, a recording is turned into an in-memory classic pcap (raw IPv4 link, one
record per datagram, in recorded order) and decoded by the very same pcap path.
"""

from __future__ import annotations

import os
import struct

import pyarrow as pa

from formats.errors import DecodeError
from formats.pcap import LINKTYPE_RAW, PcapWriter
from recorder.record.reader import RecordingMetadata, read_recording

ARROW_STREAM_CONTINUATION = b"\xff\xff\xff\xff"


def is_recording(path: str | os.PathLike[str], head: bytes) -> bool:
    """True when ``path`` is an Arrow IPC stream whose schema says it is a recount recording."""
    if not head.startswith(ARROW_STREAM_CONTINUATION):
        return False
    try:
        with pa.OSFile(os.fspath(path)) as source:
            schema = pa.ipc.open_stream(source).schema
    except (pa.ArrowException, OSError):
        return False
    metadata = schema.metadata or {}
    return metadata.get(b"recount.format") == b"recording"


def recording_as_pcap(path: str | os.PathLike[str]) -> tuple[bytes, RecordingMetadata, list[str]]:
    """The recording's datagrams as pcap bytes, its metadata, and what was wrong with it (a torn tail)."""
    name = os.fspath(path)
    datagrams, metadata, problems = read_recording(name)
    writer = PcapWriter(link_type=LINKTYPE_RAW)
    parts = [writer.file_header()]
    for number, datagram in enumerate(datagrams):
        if ":" in datagram.src_ip or ":" in datagram.dst_ip:
            raise DecodeError("IPv6 endpoints in a recording cannot be converted yet (IPv4 only)", source=name)
        try:
            parts.append(writer.udp_packet(datagram.ts_ns, datagram.src_ip, datagram.src_port,
                                           datagram.dst_ip, datagram.dst_port, datagram.payload))
        except (ValueError, OSError, struct.error) as error:  # a time past 2106, a datagram too long
            raise DecodeError(f"datagram {number}: cannot be a UDP datagram in a pcap: {error}", source=name) from None
    return b"".join(parts), metadata, [str(problem) for problem in problems]
