"""Throughput of the capture codecs: pcap records -> UDP packets -> Aeron frames -> messages.

The real capture of a 3-member Aeron 1.47.3 cluster (../shared/reference/aeron-1.47.3-capture) is
repeated in memory until it is at least ``--megabytes`` large (each copy's records keep their
bytes; only the file header is not repeated), then decoded in three stages, each timed on its own:

1. ``pcap``: `formats.pcap.PcapReader` — link, IP and UDP layers, one `Packet` per datagram;
2. ``columns``: `PcapReader.columns` — the same datagrams as arrays (what `recount convert` reads);
3. ``frames``: ``pcap`` plus `formats.udp.decode_datagram` on every payload;
4. ``messages``: the above plus one `formats.reassembly.Reassembler` per (source, session, stream).

Figures are per core (one process, one thread).  With ``--tshark`` the same bytes are also decoded
by tshark with Aeron's dissector (``-d udp.port==N,aeron`` for every Aeron port, fields out), for a
side-by-side figure; the comparison that matters for issue 4 (the whole pcap -> replay path) is
made by the importer's own benchmark (benchmarks/bench_pcap_import.py, the whole command beside tshark).

    python benchmarks/bench_pcap_decode.py
    python benchmarks/bench_pcap_decode.py --megabytes 100 --tshark --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from formats.pcap import PcapReader  # noqa: E402
from formats.reassembly import Reassembler  # noqa: E402
from formats.udp import DataFrame, PadFrame, SetupFrame, decode_datagram  # noqa: E402

DEFAULT_CAPTURE = (
    ROOT.parent / "shared" / "reference" / "aeron-1.47.3-capture" / "a_clean_start" / "capture.pcap"
)


def repeated_capture(path: Path, megabytes: int) -> tuple[bytes, int]:
    """The capture's records repeated to ``megabytes``, and how many packets one copy holds."""
    data = path.read_bytes()
    header, records = data[:24], data[24:]
    copies = max(1, -(-megabytes * 1_000_000 // len(records)))
    one_copy = PcapReader(data)
    for _ in one_copy.packets():
        pass
    return header + records * copies, one_copy.packet_count


def stage_pcap(data: bytes) -> int:
    count = 0
    for _ in PcapReader(data).packets():
        count += 1
    return count


def stage_columns(data: bytes) -> int:
    return len(PcapReader(data).columns())


def stage_frames(data: bytes) -> int:
    count = 0
    for packet in PcapReader(data).packets():
        count += len(decode_datagram(packet.payload))
    return count


def stage_messages(data: bytes, per_copy: int) -> int:
    # Each copy of the capture is a cluster run of its own: its streams get their own reassemblers,
    # or every copy after the first would be dropped as retransmissions of the first.
    streams: dict[tuple, Reassembler] = {}
    count = 0
    for packet in PcapReader(data).packets():
        copy = (packet.index - 1) // per_copy
        for frame in decode_datagram(packet.payload):
            kind = type(frame)
            if kind is DataFrame or kind is PadFrame:
                key = (copy, packet.src_ip, packet.src_port, frame.session_id, frame.stream_id)
                reassembler = streams.get(key)
                if reassembler is None:
                    reassembler = streams[key] = Reassembler()
                count += len(reassembler.on_frame(frame))
            elif kind is SetupFrame:
                # A SETUP travels from the publisher's own endpoint: key it the same way.
                key = (copy, packet.src_ip, packet.src_port, frame.session_id, frame.stream_id)
                streams.setdefault(key, Reassembler()).on_setup(frame)
    for reassembler in streams.values():
        count += len(reassembler.finish())
    return count


def timed(function, data: bytes, packets: int) -> dict:
    start = time.perf_counter()
    items = function(data)
    seconds = time.perf_counter() - start
    return {
        "items": items,
        "seconds": round(seconds, 3),
        "packetsPerSecond": round(packets / seconds),
        "megabytesPerSecond": round(len(data) / seconds / 1e6, 1),
    }


def time_tshark(data: bytes, packets: int) -> dict | None:
    tshark = shutil.which("tshark")
    if tshark is None:
        return None
    ports = sorted(
        {p.dst_port for p in PcapReader(data[:2_000_000]).packets() if 20000 <= p.dst_port < 21000}
    )
    decode_as = [arg for port in ports for arg in ("-d", f"udp.port=={port},aeron")]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bench.pcap")
        with open(path, "wb") as out:
            out.write(data)
        command = [
            tshark,
            "-n",
            "-r",
            path,
            *decode_as,
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "aeron.data.term_offset",
            "-e",
            "aeron.sm.consumption_term_offset",
        ]
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        seconds = time.perf_counter() - start
    return {
        "seconds": round(seconds, 3),
        "packetsPerSecond": round(packets / seconds),
        "megabytesPerSecond": round(len(data) / seconds / 1e6, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", type=Path, default=DEFAULT_CAPTURE, help="a classic pcap to repeat")
    parser.add_argument(
        "--megabytes", type=int, default=50, help="size to repeat the capture to (default 50)"
    )
    parser.add_argument("--tshark", action="store_true", help="also time tshark on the same bytes")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    if not args.capture.exists():
        print(f"capture not found: {args.capture} (pass --capture)", file=sys.stderr)
        return 2
    data, per_copy = repeated_capture(args.capture, args.megabytes)
    packets = stage_pcap(data)  # also warms caches (IP names, struct objects)
    result = {
        "capture": str(args.capture),
        "bytes": len(data),
        "packets": packets,
        "python": sys.version.split()[0],
        "stages": {
            "pcap": timed(stage_pcap, data, packets),
            "columns": timed(stage_columns, data, packets),
            "frames": timed(stage_frames, data, packets),
            "messages": timed(lambda data: stage_messages(data, per_copy), data, packets),
        },
    }
    if args.tshark:
        result["tshark"] = time_tshark(data, packets)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{len(data) / 1e6:.1f} MB, {packets} packets (the real capture repeated), Python {result['python']}"
    )
    for name, stage in result["stages"].items():
        print(
            f"  {name:<9} {stage['packetsPerSecond']:>10,} packets/s  {stage['megabytesPerSecond']:>7.1f} MB/s"
            f"  ({stage['items']:,} items in {stage['seconds']} s)"
        )
    if args.tshark:
        tshark = result["tshark"]
        if tshark is None:
            print("  tshark    not installed")
        else:
            ratio = result["stages"]["messages"]["packetsPerSecond"] / tshark["packetsPerSecond"]
            print(
                f"  tshark    {tshark['packetsPerSecond']:>10,} packets/s  {tshark['megabytesPerSecond']:>7.1f} MB/s"
                f"  (messages stage is {ratio:.1f}x tshark)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
