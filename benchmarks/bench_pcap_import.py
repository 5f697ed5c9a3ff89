"""Throughput of the whole import: pcap → events → replay file, per core, beside tshark on the same bytes.

The real capture of a 3-member Aeron 1.47.3 cluster (../shared/reference/aeron-1.47.3-capture) is
repeated until it is at least ``--megabytes`` large.  Each copy is made a *new* stretch of traffic,
so that the importer does the full work on it instead of dropping it as retransmissions: its
packets are moved later in time by the capture's length, and its publishers' ephemeral UDP ports
(every port that is not a member endpoint or the client's egress endpoint) are shifted by the copy's
number, which makes every publication of the copy a new stream.  (The UDP checksums are then
stale; neither recount nor tshark, whose UDP checksum check is off by default, looks at them.)

Timed, in one process and thread (CPU time of the process, so per core):

* ``recount``: `recorder.capture.pcap_import.decode_captures` (pcap, frames, reassembly, SBE,
  events) and `formats.replay_file` building the Arrow table and writing the IPC file to memory;
* ``tshark`` (when installed): ``tshark -r FILE -d udp.port==P,aeron ... -T fields -e ...`` decoding
  the same file with Wireshark's Aeron dissector (frame fields out), CPU time of the child process.

    python benchmarks/bench_pcap_import.py
    python benchmarks/bench_pcap_import.py --megabytes 100 --json
    python benchmarks/bench_pcap_import.py --runs 3          # the fastest of three recount runs
    python benchmarks/bench_pcap_import.py --pcap samples/x/host0.pcap --members '0,...'

Target (issue 4): recount ≥ 5× tshark per core.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from formats import replay_file  # noqa: E402
from formats.pcap import PcapReader  # noqa: E402
from recorder.capture.members import MemberMap  # noqa: E402
from recorder.capture.pcap_import import decode_captures  # noqa: E402

CAPTURE = ROOT.parent / "shared" / "reference" / "aeron-1.47.3-capture" / "a_clean_start"
TSHARK_FIELDS = ("frame.number", "aeron.data.session_id", "aeron.data.stream_id", "aeron.data.term_id",
                 "aeron.data.term_offset", "aeron.data.frame_length", "aeron.data.flags")


def readme_members() -> str:
    text = (CAPTURE.parent / "README.md").read_text()
    return re.search(r"`(0,127\.0\.0\.1:[^`]+)`", text).group(1)


def fixed_ports(members: MemberMap, extra: set[int]) -> set[int]:
    ports = set(extra)
    for member in members.members:
        ports |= {e.port for e in member.endpoints.values()}
    return ports


def repeated_capture(path: Path, megabytes: int, keep_ports: set[int]) -> tuple[bytes, int]:
    """The capture repeated to ``megabytes``, each copy a new stretch of traffic; and packets per copy."""
    data = path.read_bytes()
    reader = PcapReader(data)
    if reader.format != "pcap":
        raise SystemExit(f"{path}: the benchmark repeats classic pcap files only")
    little = data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
    order = "<" if little else ">"
    packets = list(reader.packets())
    first, last = packets[0].ts_ns, packets[-1].ts_ns
    span_seconds = (last - first) // 1_000_000_000 + 1
    header, body = data[:24], data[24:]
    copies = max(1, -(-megabytes * 1_000_000 // len(body)))
    out = bytearray(header)
    for copy in range(copies):
        chunk = bytearray(body)
        for packet in packets:
            record = packet.file_offset - 24
            seconds = struct.unpack_from(order + "I", chunk, record)[0]
            struct.pack_into(order + "I", chunk, record, seconds + copy * span_seconds)
            if packet.payload_offset is None:
                continue
            udp = packet.payload_offset - 24 - 8
            for at, port in ((udp, packet.src_port), (udp + 2, packet.dst_port)):
                if port not in keep_ports:
                    struct.pack_into("!H", chunk, at, (port + copy) % 65536)
        out += chunk
    return bytes(out), len(packets)


def bench_recount(data: bytes, members: MemberMap) -> dict:
    started_cpu, started_wall = time.process_time(), time.perf_counter()
    result = decode_captures([("bench.pcap", data)], members)
    decoded_cpu = time.process_time()
    table = replay_file.events_to_table(result.events, source="bench.pcap", cluster_members=members.text)
    sink = pa.BufferOutputStream()
    replay_file.write_table(table, sink)
    size = sink.getvalue().size
    cpu = time.process_time() - started_cpu
    return {
        "cpuSeconds": cpu,
        "wallSeconds": time.perf_counter() - started_wall,
        "decodeCpuSeconds": decoded_cpu - started_cpu,
        "events": len(result.events),
        "datagrams": result.summary.datagrams,
        "replayFileBytes": size,
        "problems": len(result.problems),
    }


def bench_tshark(data: bytes, ports: set[int]) -> dict | None:
    tshark = shutil.which("tshark")
    if tshark is None:
        return None
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.pcap"
        path.write_bytes(data)
        arguments = [tshark, "-n", "-r", str(path)]
        for port in sorted(ports):
            arguments += ["-d", f"udp.port=={port},aeron"]
        arguments += ["-T", "fields"] + [x for f in TSHARK_FIELDS for x in ("-e", f)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(arguments, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stdout.count(b"\n")
    return {"cpuSeconds": cpu, "wallSeconds": wall, "rows": lines, "exitCode": done.returncode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pcap", type=Path, default=CAPTURE / "capture.pcap")
    parser.add_argument("--members", default=None, help="members string (default: the capture README's)")
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--no-tshark", action="store_true")
    parser.add_argument("--runs", type=int, default=1, help="time recount this many times; report the fastest run"
                        " (CPU time still varies on a busy machine)")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    members = MemberMap.parse(options.members or readme_members())
    keep = fixed_ports(members, {20900})  # the client's egress endpoint in the real capture
    data, per_copy = repeated_capture(options.pcap, options.megabytes, keep)
    megabytes = len(data) / 1e6
    recount = min((bench_recount(data, members) for _ in range(max(1, options.runs))), key=lambda r: r["cpuSeconds"])
    tshark = None if options.no_tshark else bench_tshark(data, keep)
    report = {
        "input": str(options.pcap),
        "megabytes": round(megabytes, 1),
        "packetsPerCopy": per_copy,
        "recount": {
            **recount,
            "megabytesPerSecond": megabytes / recount["cpuSeconds"],
            "eventsPerSecond": recount["events"] / recount["cpuSeconds"],
            "datagramsPerSecond": recount["datagrams"] / recount["cpuSeconds"],
        },
    }
    if tshark is not None:
        report["tshark"] = {**tshark, "megabytesPerSecond": megabytes / tshark["cpuSeconds"]}
        report["speedupPerCore"] = tshark["cpuSeconds"] / recount["cpuSeconds"]
    if options.json:
        print(json.dumps(report, indent=2))
        return 0
    r = report["recount"]
    print(f"input: {report['input']} repeated to {report['megabytes']} MB ({r['datagrams']} datagrams)")
    print(f"recount pcap → replay file: {r['cpuSeconds']:.2f} s CPU ({r['decodeCpuSeconds']:.2f} s decoding),"
          f" {r['megabytesPerSecond']:.1f} MB/s, {r['eventsPerSecond']:,.0f} events/s,"
          f" {r['datagramsPerSecond']:,.0f} datagrams/s per core; {r['events']} events, {r['problems']} problems")
    if tshark is not None:
        t = report["tshark"]
        print(f"tshark -d udp.port==P,aeron -T fields: {t['cpuSeconds']:.2f} s CPU, {t['megabytesPerSecond']:.1f} MB/s"
              f" ({t['rows']} rows, exit {t['exitCode']})")
        print(f"recount is {report['speedupPerCore']:.1f}× tshark per core (target ≥ 5×)")
    else:
        print("tshark: not run (not installed, or --no-tshark)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
