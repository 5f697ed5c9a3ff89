"""`recount convert` of a large pcap beside tshark on the same file: wall time, packets/s, peak memory.

The real capture of a 3-member Aeron 1.47.3 cluster (../shared/reference/aeron-1.47.3-capture) is
repeated until it holds at least ``--packets`` packets.  Each copy is made a *new* stretch of
traffic, so that the importer does the full work on it instead of dropping it as retransmissions:
its packets are moved later in time by the capture's length, and its publishers' ephemeral UDP ports
(every port that is not a member endpoint or the client's egress endpoint) are shifted by the copy's
number, which makes every publication of the copy a new stream.  (The UDP checksums are then
stale; neither recount nor tshark, whose UDP checksum check is off by default, looks at them.)

Each round runs, one after the other in a fresh process each and in an order that alternates from
round to round (paired runs: the machine's load hits both alike):

* ``recount``: ``python -m cli convert FILE -o OUT.arrow --members ...``, this checkout's code, the
  whole command as a user runs it (start-up, decoding, writing the replay file);
* ``before`` (with ``--before DIR``): the same command run from another checkout (say, a ``git
  worktree`` of the commit before a change), whose replay file must be byte-identical;
* ``tshark``: ``tshark -n --enable-heuristic aeron_udp -r FILE -T fields -e frame.number -e
  aeron.data.*``, Wireshark's Aeron dissector writing each frame's fields to a file.

Figures are medians over the rounds: wall-clock seconds, packets per second, peak resident memory
(the child's own ``ru_maxrss``, from ``os.wait4``), and the ratios to tshark.  Each command runs once
untimed first (the capture in the page cache, recount's bytecode written, as an installed recount
has it).  The capture is built
by a child process of its own: a child's ``ru_maxrss`` starts from its parent's peak (fork), so the
process that runs the commands stays small.

    python benchmarks/bench_pcap_import.py                       # 400k packets, 3 rounds
    python benchmarks/bench_pcap_import.py --rounds 5 --json
    python benchmarks/bench_pcap_import.py --before /tmp/recount-before   # figures before and after

Target (issue 13): recount ≥ 5× tshark's packets/s, with peak memory at most tshark's.

Figures now (ninth session, main at f41abc5; 2-core machine, otherwise quiet; 401,115 packets; medians;
the replay files byte-identical to 2ec46e3's, the start of that session)::

    9 rounds:  recount  1.008 s wall  (0.949-1.034)  175.9 MB peak RSS   5.27× tshark (every round 5.14-5.65×)
               tshark   5.309 s wall  (5.158-5.533)  190.6 MB peak RSS   recount at 0.92× its memory
    7 rounds, paired with 2ec46e3 (a slower spell of the machine):  recount 1.030 s, before 1.271 s,
               tshark 5.305 s: 5.15× against 4.17×

What that session took off: 15 ms of start-up (the cluster codecs' dataclass methods written out by the
generator, `formats/cluster_codecs.py`); and, each in its own section below, the walk and the members'
lives, the datagram sort, the final sort and the write, the flow-control and driver-stall scans and the
settings, and the reading of the capture's columns.

Earlier figures (2026-11-25, 2-core machine shared with other benchmarks (load 0.8-0.9 during the run), 401,115
packets, 7 paired rounds, medians; ``before`` is main at 1663d48, the replay files byte-identical)::

    recount  1.280 s wall  313,353 packets/s  175.9 MB peak RSS  (1.29 s CPU)  4.40× tshark, 0.92× its memory
    before   1.515 s wall  264,709 packets/s  183.0 MB peak RSS  (1.57 s CPU)  3.71× tshark, 0.96× its memory
    tshark   5.626 s wall   71,292 packets/s  190.6 MB peak RSS  (5.61 s CPU)

(An earlier run, load 0.8-1.5: recount 1.234 s, before 1.466 s, tshark 5.421 s: 4.39× against 3.70×.)
What the step from ``before`` took off, each measured alone: the replaced output renamed aside and
removed after the new file is in place (``--force``) instead of a rename over it, which made ext4
(auto_da_alloc) write the new 152 MB file out there and then, 0.05-0.09 s of wall (more under load);
Typer's pydantic TypeAdapters (one built per non-bool parameter, even one left out, whatever its
declared type: no declaration avoids it) bypassed for values they give back unchanged
(cli/deferred_coercion.py), 70 ms; the interpreter's teardown skipped once output is flushed and exit
handlers ran, 50 ms; numpy's OpenBLAS started without its worker thread, which polled for 50 ms of the
other core (CPU, and wall under load); importlib.metadata imported only where user models are looked
up, 6 ms; endpoints numbered by a table rather than a sort in the flow-control and driver-stall scans,
15 ms; nine-digit numbers of the extra column written with 32-bit division, 8 ms.

Sorting the datagrams, the final sort and writing the replay file with fewer passes (2026-11-25, paired
runs of the command, medians of the per-round differences, replay files identical): against 2ec46e3 (16
rounds, load about 1) 1.245 -> 1.146 s wall, 109 ms less wall and 112 ms less CPU; merged with main at
8798507 (the walk's and the lives' changes; 20 rounds, load 1.1) 1.151 -> 1.073 s, 94 ms less wall and 96
ms less CPU, every round faster; peak memory 163.7 -> 165.3 MB there (the walk's peak, +0 to 2.5 MB from
run to run).  In one process: sorting the datagrams 177 -> 129 ms, the final sort 45 -> 37 ms, writing
178 -> 130-145 ms (below, where each goes now).

Where a conversion's time goes now (load about 0.6, in one process, medians of three): start-up and
imports 0.18-0.20 s (the interpreter and site 0.05; numpy and pyarrow 0.10; Typer and rich 0.05;
recount's own modules 0.06, of which the SBE codecs' 59 dataclasses 0.025 -- each dataclass compiles
its methods, 0.4 ms a class); argument parsing 4 ms; reading the capture's columns 0.15 (the record
walk's one Python loop 0.05, the common-layout decoding 0.05); flow-control and driver-stall scans 0.08
(their header gathers 0.03); sorting the datagrams 0.13 (was 0.19: the headers and the messages' bytes
read in one pass over the file 0.035, the messages grouped by their bytes and decoded once 0.015,
streams numbered 0.02); the walk 0.22 (6,435 datagrams fed one by one 0.085, 5,655 runs checked and
applied 0.06, the runs' events 0.03); the final sort 0.035 (was 0.045: the fed datagrams' events
made 0.009, ordered 0.007, gathered 0.012); members' lives 0.085; settings 0.04; writing the 152 MB
replay file 0.13-0.145 (was 0.17-0.22: record batches 0.08 -- the extra column's text 0.02, payload and
fields 0.015, the per-name columns 0.03 --, Arrow's writer 0.04, the table plan 0.013); the summary
0.015; the exit 5 ms (figures of the sort, final sort and writing: load about 2, medians of seven).
Peak memory is the walk, then the lives; the sort of the datagrams peaks 12 MB below where it did.
Tried and dropped (no gain, or memory over tshark's): the scans on a thread beside the walk (the GIL:
same wall, +6 MB); pages of the capture kept between passes (10-20 ms, +38 MB); larger or smaller
stretches of the file; fewer malloc_trim calls (-40% page faults, no measurable time); the final sort
on one packed 64-bit key (the times' span and the packet numbers need 75 bits); all a batch's text, or
int64, per-name columns taken as one matrix (as slow: the work is per row, not per call); the extra
column made with Arrow's cast and binary_join kernels (5.3 against numpy's 5.4 ms a batch); Arrow's
pool kept between batches (no gain, +14 MB).  5× needs about 0.2 s more: no single step holds it; the next
factor would be fewer passes over the data in Python (the walk's fed datagrams and runs, the lives) and
a codec module whose message classes cost nothing to import.

The walk and the members' lives, fewer Python passes (2026-11-25, paired with 2ec46e3, 7 rounds, load
1.1-2.6, replay files identical): recount 1.167 -> 1.080 s wall (median of paired differences 87 ms),
1.17 -> 1.08 s CPU, peak memory unchanged (175.9 MB), 4.41x -> 4.76x tshark.  In process: the walk 227 ->
160 ms (the messages that make a publication's sender known taken in runs: 6,435 -> 4,875 datagrams fed
one by one; the members' spans of activity from stretches, 22 -> 7 ms; status messages settled for every
stream at once, 15 -> 5 ms), the members' lives 87 -> 67 ms (the final order by merging the few moved rows
and extra events into rows already in time order instead of a lexsort of all; each member's sends grouped
once; each row's type looked up once).  What is left of the walk is Python per stream: the bench's copies
make 5,000 streams, each with its SETUPs fed (3,315, 10 us each: a new stream's objects), a check and a run
(5,655, 6-7 us each); and the 1,170 datagrams of two or four frames, fed because they carry a
NewLeadershipTerm.  Tried and dropped: every member's sent rows marked in one array over the capture's rows
and sorted by member (as slow as the sorts it replaced: fresh pages of 400k-row arrays cost 0.3 ms a MB
here); each member's rows found once and every per-member step done on them (the gathers cost what the
masks did); the rows of each type by one sort of all the rows by type (its radix sort cost what the
lookups saved).

Reading the capture into columns with fewer, wider gathers (2026-11-25, against cbdf196, replay files
identical, peak memory unchanged at 176.0 MB): the command 1.049 -> 0.974 s wall (5 paired rounds, medians
of each, load about 1; 5.12x -> 5.51x tshark) with 1 MB stretches (dropped, below); as committed, 1.177 ->
1.183 s under a heavier load (5 rounds: lost in the noise); in one process 98-103 -> 75-78 ms (median of five, two alternations):
each record header (seconds, fraction, caplen, origlen) in one gather of 16-byte void windows instead of
four word gathers; over Ethernet or SLL, when every record of a stretch is long enough, the ethertype and
the IPv4 and UDP headers' fields in one 30-byte window gather, tested together (the general way, a
gather per link test then four word gathers, 33 -> 19 ms for `_fast_rows`); the address lookup
without bounds checks (1.2 ms); the record walk's words from byte 8 (one addition less a record: ~4 ms alone).
Tried and dropped: stretches of 1 MB instead of 4 (3.8 ms less, paired, but the addresses are numbered
in the order the stretches first show them, and a damaged capture's then came out in another order);
the record header and the IP/UDP fields in one 58- or 64-byte window (the gather is
cheaper, but reading fields out of the wider rows cost more: +1.5 to +4 ms); the walk's offsets in an
array.array instead of a list (+3 ms in place); np.fromiter instead of np.array for them (0.6 ms, noise);
the walk unrolled four records an iteration, or as a comprehension (no gain on 3.11); the joined columns
in one allocation, which the kernel backs with huge pages (4-7 ms less in a fresh process, but convert's
peak RSS 166.6 -> 188.7 MB: the columns' memory then goes only when all of them go).  What is left is the
walk's Python loop (about 29 ms: 70 ns a record) and the gathers from the file (about 5 ms each).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CAPTURE = ROOT.parent / "shared" / "reference" / "aeron-1.47.3-capture" / "a_clean_start"
CLIENT_EGRESS_PORT = 20900  # the client's egress endpoint in the real captures
TSHARK_FIELDS = ("frame.number", "aeron.data.session_id", "aeron.data.stream_id", "aeron.data.term_id",
                 "aeron.data.term_offset", "aeron.data.frame_length", "aeron.data.flags")


def readme_members() -> str:
    text = (CAPTURE.parent / "README.md").read_text()
    return re.search(r"`(0,127\.0\.0\.1:[^`]+)`", text).group(1)


def fixed_ports(members, extra: set[int]) -> set[int]:
    ports = set(extra)
    for member in members.members:
        ports |= {e.port for e in member.endpoints.values()}
    return ports


def repeated_capture(path: Path, packets: int, keep_ports: set[int]) -> tuple[bytes, int, int]:
    """The capture repeated to at least ``packets`` packets, each copy a new stretch of traffic; the
    packets per copy, and the copies."""
    from formats.pcap import PcapReader

    data = path.read_bytes()
    reader = PcapReader(data)
    if reader.format != "pcap":
        raise SystemExit(f"{path}: the benchmark repeats classic pcap files only")
    little = data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
    order = "<" if little else ">"
    udp_packets = list(reader.packets())
    per_copy = reader.packet_count
    first, last = udp_packets[0].ts_ns, udp_packets[-1].ts_ns
    span_seconds = (last - first) // 1_000_000_000 + 1
    header, body = data[:24], data[24:]
    copies = max(1, -(-packets // per_copy))
    out = bytearray(header)
    for copy in range(copies):
        chunk = bytearray(body)
        offset = 0
        while offset < len(chunk):  # every record's time, UDP or not
            seconds, _, caplen, _ = struct.unpack_from(order + "IIII", chunk, offset)
            struct.pack_into(order + "I", chunk, offset, seconds + copy * span_seconds)
            offset += 16 + caplen
        for packet in udp_packets:
            if packet.payload_offset is None:
                continue
            udp = packet.payload_offset - 24 - 8
            for at, port in ((udp, packet.src_port), (udp + 2, packet.dst_port)):
                if port not in keep_ports:
                    struct.pack_into("!H", chunk, at, (port + copy) % 65536)
        out += chunk
    return bytes(out), per_copy, copies


def run(argv: list[str], *, env: dict[str, str] | None = None, stdout=subprocess.DEVNULL, cwd: Path | None = None
        ) -> dict:
    """One child process: wall seconds, its own peak RSS (MB) and CPU seconds, exit status."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=cwd)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    error = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... exited {child.returncode}:\n{error[-2000:]}")
    return {"wallSeconds": wall, "peakRssMb": usage.ru_maxrss / 1024, "cpuSeconds": usage.ru_utime + usage.ru_stime}


def recount_runner(checkout: Path, pcap: Path, out: Path, members: str, pycache: Path):
    # As an installed recount runs: its modules' bytecode cached (in a folder of the benchmark's own, so
    # the checkout is left alone), which a warm-up run writes first.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(checkout), PYTHONPYCACHEPREFIX=str(pycache))
    argv = [sys.executable, "-m", "cli", "convert", str(pcap), "-o", str(out), "--force", "--members", members]

    def once() -> dict:
        figures = run(argv, env=env, cwd=checkout)  # ``python -m`` looks in the working directory first
        figures["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
        return figures

    return once


def tshark_runner(tshark: str, pcap: Path, out: Path):
    argv = [tshark, "-n", "--enable-heuristic", "aeron_udp", "-r", str(pcap), "-T", "fields"]
    argv += [x for name in TSHARK_FIELDS for x in ("-e", name)]

    def once() -> dict:
        with open(out, "wb") as sink:
            figures = run(argv, stdout=sink)
        figures["rows"] = out.read_bytes().count(b"\n")
        return figures

    return once


def summarise(results: list[dict], packets: int) -> dict:
    wall = statistics.median(r["wallSeconds"] for r in results)
    return {
        "wallSeconds": round(wall, 3),
        "packetsPerSecond": round(packets / wall),
        "peakRssMb": round(statistics.median(r["peakRssMb"] for r in results), 1),
        "cpuSeconds": round(statistics.median(r["cpuSeconds"] for r in results), 3),
        "runs": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in results],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pcap", type=Path, default=CAPTURE / "capture.pcap", help="a classic pcap to repeat")
    parser.add_argument("--members", default=None, help="members string (default: the capture README's)")
    parser.add_argument("--packets", type=int, default=400_000, help="repeat the capture to at least this many")
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds (the median is reported)")
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout of recount to time the same way (its replay file must be identical)")
    parser.add_argument("--no-tshark", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--make", type=Path, default=None, help=argparse.SUPPRESS)  # the child that builds it
    options = parser.parse_args(argv)
    members_text = options.members or readme_members()
    if options.make is not None:
        from recorder.capture.members import MemberMap

        keep = fixed_ports(MemberMap.parse(members_text), {CLIENT_EGRESS_PORT})
        data, per_copy, copies = repeated_capture(options.pcap, options.packets, keep)
        options.make.write_bytes(data)
        print(json.dumps({"perCopy": per_copy, "copies": copies, "bytes": len(data)}))
        return 0
    tshark = None if options.no_tshark else shutil.which("tshark")
    with tempfile.TemporaryDirectory(prefix="bench-pcap-import-") as directory:
        folder = Path(directory)
        pcap = folder / "bench.pcap"
        made = subprocess.run([sys.executable, __file__, "--pcap", str(options.pcap), "--members", members_text,
                               "--packets", str(options.packets), "--make", str(pcap)],
                              capture_output=True, text=True, check=True)
        built = json.loads(made.stdout)
        per_copy, copies = built["perCopy"], built["copies"]
        packets = per_copy * copies
        runners = {"recount": recount_runner(ROOT, pcap, folder / "after.arrow", members_text, folder / "pycache")}
        if options.before is not None:
            runners["before"] = recount_runner(options.before.resolve(), pcap, folder / "before.arrow", members_text,
                                               folder / "pycache-before")
        if tshark is not None:
            runners["tshark"] = tshark_runner(tshark, pcap, folder / "tshark.tsv")
        results: dict[str, list[dict]] = {name: [] for name in runners}
        names = list(runners)
        for runner in runners.values():  # warm-up, not timed: bytecode written, the capture in the page cache
            runner()
        for round_number in range(max(1, options.rounds)):
            turn = names[round_number % len(names):] + names[: round_number % len(names)]
            if round_number % 2:
                turn.reverse()
            for name in turn:
                results[name].append(runners[name]())
    report: dict = {"input": str(options.pcap), "copies": copies, "packets": packets,
                    "megabytes": round(built["bytes"] / 1e6, 1), "rounds": max(1, options.rounds)}
    for name, runs in results.items():
        report[name] = summarise(runs, packets)
    hashes = {name: {r["sha256"] for r in runs} for name, runs in results.items() if name != "tshark"}
    report["replayFileSha256"] = {name: sorted(h) for name, h in hashes.items()}
    if "before" in hashes:
        report["identicalToBefore"] = hashes["before"] == hashes["recount"] and len(hashes["recount"]) == 1
    if "tshark" in report:
        t = report["tshark"]
        for name in hashes:
            report[name]["speedupOverTshark"] = round(t["wallSeconds"] / report[name]["wallSeconds"], 2)
            report[name]["memoryOfTshark"] = round(report[name]["peakRssMb"] / t["peakRssMb"], 2)
    if options.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"input: {report['input']} repeated {report['copies']}× = {packets:,} packets, {report['megabytes']} MB;"
          f" {report['rounds']} paired rounds, medians")
    for name in results:
        r = report[name]
        ratio = (f"  {r['speedupOverTshark']:.2f}× tshark's speed, {r['memoryOfTshark']:.2f}× its memory"
                 if "speedupOverTshark" in r else "")
        print(f"  {name:<8} {r['wallSeconds']:7.3f} s wall  {r['packetsPerSecond']:>9,} packets/s"
              f"  {r['peakRssMb']:6.1f} MB peak RSS  ({r['cpuSeconds']:.2f} s CPU){ratio}")
    if "identicalToBefore" in report:
        print(f"  replay file identical to before: {'yes' if report['identicalToBefore'] else 'NO'}")
    if tshark is None:
        print("  tshark: not run (not installed, or --no-tshark)")
    else:
        print("  target (issue 13): recount ≥ 5× tshark's speed, at most its memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
