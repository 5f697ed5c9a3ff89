"""Load test for `recount record`: push datagrams through the recording proxy on loopback and check
that every one arrives, in order and unaltered, at the member and in the recording.

Three parties, all on 127.0.0.1: this process sends (a stand-in for two of a member's publications,
consensus and log, from two sockets as Aeron sends them), a forked process receives as "member 1" on
its consensus and log endpoints and answers the datagrams `replies_to` picks, on both channels, the way
an Aeron receiver answers with a status message (to the datagram's source address), and the proxy
runs as its own process, ``python -m cli record``, exactly as a user runs it.

Every payload is a pure function of its sequence number (the number, then a slice of a fixed
pseudo-random pattern; every 16th datagram MTU-sized), and so is its channel (even: consensus, odd:
log), so the receiver, the sender (for replies) and the recording check can each tell lost,
reordered and altered datagrams apart, channel by channel.  Latency is the time
from the sender's send call to the receiver's return from recvfrom, both on CLOCK_MONOTONIC (one
clock for every process on the host), so it includes the proxy's two extra hops.

Bounded: the count is rate x seconds, every wait has a timeout, and the recording goes to a temporary
directory that is removed afterwards.

    python benchmarks/bench_record_proxy.py                  # 50,000 datagrams/s for 30 s
    python benchmarks/bench_record_proxy.py --rate 20000 --seconds 5 --json
    python benchmarks/bench_record_proxy.py --busy 1         # and one process spinning on a CPU
    python benchmarks/bench_record_proxy.py --rate 20000 --added-latency   # latency the proxy adds

``--busy N`` runs N processes that keep a CPU busy for the whole run, standing in for the other jobs of
a shared host.  The proxy's CPU time (user + system, from /proc) is reported, and so are the summary's
``kernelDrops`` (datagrams the kernel dropped because the proxy fell behind).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from recorder.record.proxy import _udp_socket as _buffered_udp_socket  # noqa: E402
from recorder.record.proxy import read_udp_drops  # noqa: E402
from recorder.record.reader import read_recording_table  # noqa: E402

HOST = "127.0.0.1"
#: One datagram in REPLY_EVERY is answered (seq % REPLY_EVERY of 0 on consensus and 1 on log).
REPLY_EVERY = 8
CHANNELS = ("consensus", "log")
SMALL, LARGE, REPLY_SIZE = 64, 1376, 36
#: Fixed pseudo-random bytes that payloads are cut from (seeded: the same in every run and process).
PATTERN = random.Random(20240611).randbytes(4096)
SEQ = struct.Struct("<Q")
PROXY_COMMAND = os.environ.get("RECOUNT_BENCH_PROXY", "-m cli").split()


def payload(seq: int) -> bytes:
    size = LARGE if seq % 16 == 15 else SMALL
    start = seq % 1021
    return SEQ.pack(seq) + PATTERN[start : start + size - SEQ.size]


def channel_of(seq: int) -> int:
    return seq % 2


def replies_to(seq: int) -> bool:
    return seq % (2 * REPLY_EVERY) < 2


def replied(count: int) -> list[int]:
    """The seqs answered, in order, of the first ``count`` datagrams."""
    return [seq for seq in range(count) if replies_to(seq)]


def reply_payload(seq: int) -> bytes:
    start = (seq * 7) % 1021
    return SEQ.pack(seq) + PATTERN[start : start + REPLY_SIZE - SEQ.size]


@dataclass
class LoadResult:
    rate: int
    seconds: float
    sent: int
    send_seconds: float
    received: int
    lost: int
    reordered: int
    altered: int
    replies_sent: int
    replies_received: int
    replies_bad: int
    recorded_to_member: int
    recorded_from_member: int
    recording_mismatches: int
    recording_problems: list[str]
    latency_p50_us: float
    latency_p99_us: float
    latency_max_us: float
    proxy_summary: dict
    #: The host's 1-minute load average before and after: other jobs on a small host starve the
    #: proxy of CPU, and a starved proxy's socket buffer overflows (the figures need a quiet host).
    load_average: tuple[float, float] = (0.0, 0.0)
    busy: int = 0  #: processes spinning on a CPU during the run
    proxy_cpu_seconds: tuple[float, float] = (float("nan"), float("nan"))  #: the proxy's user and system time
    proxy_stderr: str = ""  #: what the proxy said (it warns on stderr when it falls behind)
    #: Datagrams the kernel dropped at the stand-in member's own sockets (it was starved, not the proxy).
    member_socket_drops: int = 0

    @property
    def throughput(self) -> float:
        return self.sent / self.send_seconds if self.send_seconds else 0.0

    @property
    def perfect(self) -> bool:
        return (
            self.received == self.sent
            and self.lost == self.reordered == self.altered == 0
            and self.replies_received == self.replies_sent
            and self.replies_bad == 0
            and self.recorded_to_member == self.sent
            and self.recorded_from_member == self.replies_sent
            and self.recording_mismatches == 0
        )


def _udp_socket() -> socket.socket:
    """A socket with buffers as deep as the proxy's own (forced past rmem_max where allowed), so that
    a starved stand-in member loses as little as it can: the load test measures the proxy."""
    sock = _buffered_udp_socket(socket.AF_INET)
    sock.bind((HOST, 0))
    return sock


def _member(sockets: list[socket.socket], count: int, connection, idle_timeout_s: float) -> None:
    """The stand-in member: receive on both channels, check, time, and answer the chosen datagrams."""
    received_ns = array("q", bytes(8 * count))
    expected = [0, 1]
    received = reordered = altered = replies = 0
    monotonic_ns = time.monotonic_ns
    for sock in sockets:
        sock.setblocking(False)
    connection.send("ready")
    try:
        while received < count:
            readable, _, _ = select.select(sockets, [], [], idle_timeout_s)
            if not readable:
                break
            for sock in readable:
                channel = sockets.index(sock)
                while True:
                    try:
                        data, source = sock.recvfrom(65536)
                    except BlockingIOError:
                        break
                    now = monotonic_ns()
                    seq = SEQ.unpack_from(data)[0] if len(data) >= SEQ.size else -1
                    if not 0 <= seq < count or channel_of(seq) != channel:
                        altered += 1
                        continue
                    received += 1
                    received_ns[seq] = now
                    if seq != expected[channel]:
                        reordered += 1
                    expected[channel] = seq + 2
                    if data != payload(seq):
                        altered += 1
                    if replies_to(seq):
                        sock.sendto(reply_payload(seq), source)
                        replies += 1
    finally:
        connection.send((received, reordered, altered, replies))
        connection.send_bytes(received_ns.tobytes())
        connection.close()


def _busy(stop_at: float) -> None:
    """Keep one CPU busy until ``stop_at`` (monotonic), as another job on a shared host would."""
    while time.monotonic() < stop_at:
        sum(range(10_000))


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of a live process (Linux /proc), or NaNs."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, ValueError, IndexError):
        return float("nan"), float("nan")


def _start_proxy(members: str, out_dir: str, flush_ms: int) -> tuple[subprocess.Popen, dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen(
        [
            sys.executable,
            *PROXY_COMMAND,
            "record",
            "--members",
            members,
            "--out",
            out_dir,
            "--json",
            "--flush-ms",
            str(flush_ms),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=None if os.environ.get("RECOUNT_BENCH_PROXY") else subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    if not line:
        process.kill()
        raise RuntimeError(f"the proxy did not start: {process.stderr.read().strip()}")
    return process, json.loads(line)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _percentile(sorted_values: list[int], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))] / 1000.0


def _check_recording(path: str, count: int) -> tuple[int, int, int, list[str]]:
    """Rows to and from the member, and how many differ from what was sent, channel by channel in order."""
    table, _, problems = read_recording_table(path)
    directions = table.column("direction").to_pylist()
    channels = table.column("channel").to_pylist()
    payloads = table.column("payload").to_pylist()
    answered = replied(count)
    next_sent = {channel: index for index, channel in enumerate(CHANNELS)}
    next_reply = {channel: [seq for seq in answered if CHANNELS[channel_of(seq)] == channel] for channel in CHANNELS}
    reply_index = dict.fromkeys(CHANNELS, 0)
    to_member = from_member = mismatches = 0
    for direction, channel, data in zip(directions, channels, payloads, strict=True):
        if direction == "toMember":
            mismatches += data != payload(next_sent[channel])
            next_sent[channel] += 2
            to_member += 1
        else:
            seqs, index = next_reply[channel], reply_index[channel]
            mismatches += index >= len(seqs) or data != reply_payload(seqs[index])
            reply_index[channel] += 1
            from_member += 1
    return to_member, from_member, mismatches, [str(problem) for problem in problems]


def run_load(
    *,
    rate: int,
    seconds: float,
    flush_ms: int = 100,
    out_dir: str | None = None,
    direct: bool = False,
    busy: int = 0,
) -> LoadResult:
    """Send ``rate`` datagrams/s for ``seconds`` through a fresh proxy; check and measure everything.
    ``direct`` sends straight to the member instead: the harness's own latency, for comparison.
    ``busy`` processes spin on the CPUs meanwhile."""
    load_before = os.getloadavg()[0]
    count = max(1, int(rate * seconds))
    context = multiprocessing.get_context("fork")
    member_sockets = [_udp_socket(), _udp_socket()]  # member 1's consensus and log endpoints
    others = [_udp_socket() for _ in range(4)]  # members 0 and 2: real ports nobody else takes
    members = "|".join(
        f"{member_id},{HOST}:1,{HOST}:{consensus.getsockname()[1]},{HOST}:{log.getsockname()[1]},{HOST}:0,{HOST}:2"
        for member_id, (consensus, log) in enumerate(
            [(others[0], others[1]), tuple(member_sockets), (others[2], others[3])]
        )
    )
    spinners = [context.Process(target=_busy, args=(time.monotonic() + seconds + 15,), daemon=True)
                for _ in range(busy)]
    for spinner in spinners:
        spinner.start()
    senders = [_udp_socket(), _udp_socket()]  # a consensus and a log publication: two source ports
    proxy_cpu = (float("nan"), float("nan"))
    with tempfile.TemporaryDirectory(prefix="recount-bench-", dir=out_dir) as directory:
        if direct:
            proxy, plan = None, {}
            targets = [sock.getsockname() for sock in member_sockets]
        else:
            proxy, plan = _start_proxy(members, directory, flush_ms)
        try:
            if proxy is not None:
                targets = [
                    _address(next(e["proxy"] for e in plan["endpoints"]
                                  if e["memberId"] == 1 and e["channel"] == channel))
                    for channel in CHANNELS
                ]
            parent_end, child_end = context.Pipe()
            member = context.Process(
                target=_member, args=(member_sockets, count, child_end, 2.0 + seconds / 10)
            )
            member.start()
            child_end.close()
            if not parent_end.poll(10) or parent_end.recv() != "ready":
                raise RuntimeError("the stand-in member did not start")

            for sender in senders:
                sender.setblocking(False)
            sent_ns = array("q", bytes(8 * count))
            answered = replied(count)
            expected_replies = [[seq for seq in answered if channel_of(seq) == c] for c in range(2)]
            replies_seen = [0, 0]
            replies_bad = 0
            monotonic_ns = time.monotonic_ns
            send = [sender.sendto for sender in senders]

            def drain_replies() -> None:
                nonlocal replies_bad
                for channel, sender in enumerate(senders):
                    while True:
                        try:
                            data = sender.recv(65536)
                        except BlockingIOError:
                            break
                        index = replies_seen[channel]
                        seqs = expected_replies[channel]
                        if index >= len(seqs) or data != reply_payload(seqs[index]):
                            replies_bad += 1
                        replies_seen[channel] += 1

            start = monotonic_ns()
            seq = 0
            while seq < count:
                due = min(count, (monotonic_ns() - start) * rate // 1_000_000_000 + 1)
                while seq < due:
                    channel = seq & 1
                    sent_ns[seq] = monotonic_ns()
                    send[channel](payload(seq), targets[channel])
                    seq += 1
                drain_replies()
                time.sleep(0.0002)
            send_seconds = (monotonic_ns() - start) / 1e9

            (received, reordered, altered, replies_sent) = parent_end.recv()
            received_ns = array("q")
            received_ns.frombytes(parent_end.recv_bytes())
            member.join(10)
            deadline = time.monotonic() + 2
            while sum(replies_seen) < replies_sent and time.monotonic() < deadline:
                drain_replies()
                time.sleep(0.001)
        finally:
            if proxy is not None:
                proxy_cpu = _cpu_seconds(proxy.pid)
                proxy.send_signal(signal.SIGTERM)
                try:
                    stdout, stderr = proxy.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    proxy.kill()
                    stdout, stderr = proxy.communicate()
            for spinner in spinners:
                spinner.terminate()
                spinner.join(5)
        latencies = sorted(received_ns[i] - sent_ns[i] for i in range(count) if received_ns[i])
        if proxy is None:
            summary, (to_member, from_member, mismatches, problems) = {}, (count, replies_sent, 0, [])
        else:
            if proxy.returncode != 0:
                raise RuntimeError(f"the proxy exited with {proxy.returncode}: {stderr.strip()}")
            summary = json.loads(stdout.strip().splitlines()[-1])
            to_member, from_member, mismatches, problems = _check_recording(plan["recording"], count)
    member_drops = sum(read_udp_drops(os.fstat(sock.fileno()).st_ino for sock in member_sockets).values())
    for sock in (*member_sockets, *senders, *others):
        sock.close()
    return LoadResult(
        rate=rate,
        seconds=seconds,
        sent=count,
        send_seconds=send_seconds,
        received=received,
        lost=count - received,
        reordered=reordered,
        altered=altered,
        replies_sent=replies_sent,
        replies_received=sum(replies_seen),
        replies_bad=replies_bad,
        recorded_to_member=to_member,
        recorded_from_member=from_member,
        recording_mismatches=mismatches,
        recording_problems=problems,
        latency_p50_us=_percentile(latencies, 0.50),
        latency_p99_us=_percentile(latencies, 0.99),
        latency_max_us=latencies[-1] / 1000.0 if latencies else float("nan"),
        proxy_summary=summary,
        load_average=(load_before, os.getloadavg()[0]),
        busy=busy,
        proxy_cpu_seconds=proxy_cpu,
        proxy_stderr=stderr.strip() if proxy is not None and stderr else "",
        member_socket_drops=member_drops,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=50_000, help="datagrams per second (default 50000)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to send (default 30)")
    parser.add_argument("--flush-ms", type=int, default=100)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON document")
    parser.add_argument(
        "--direct",
        action="store_true",
        help="no proxy: send straight to the member (the harness's own latency, for comparison)",
    )
    parser.add_argument("--busy", type=int, default=0, help="processes keeping a CPU busy meanwhile (default 0)")
    parser.add_argument(
        "--added-latency",
        action="store_true",
        help="also run the same load straight to the member first, and print the latency the proxy adds "
        "(proxied p50/p99 minus direct p50/p99)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.rate <= 200_000 or not 0 < args.seconds <= 300:
        parser.error("keep it bounded: 0 < rate <= 200000 and 0 < seconds <= 300")
    baseline = None
    if args.added_latency and not args.direct:
        baseline = run_load(rate=args.rate, seconds=args.seconds, flush_ms=args.flush_ms, direct=True,
                            busy=args.busy)
    result = run_load(rate=args.rate, seconds=args.seconds, flush_ms=args.flush_ms, direct=args.direct,
                      busy=args.busy)
    added = None if baseline is None else {
        "direct_p50_us": baseline.latency_p50_us,
        "direct_p99_us": baseline.latency_p99_us,
        "added_p50_us": result.latency_p50_us - baseline.latency_p50_us,
        "added_p99_us": result.latency_p99_us - baseline.latency_p99_us,
    }
    if args.json:
        print(json.dumps(dict(asdict(result), throughput=result.throughput, perfect=result.perfect,
                              added_latency=added)))
    else:
        print(
            f"sent {result.sent} datagrams in {result.send_seconds:.1f} s ({result.throughput:,.0f}/s) "
            f"{'straight to the member' if args.direct else 'through the recording proxy'} "
            f"(+ {result.replies_sent} replies back)"
        )
        print(
            f"member received {result.received}: lost {result.lost}, reordered {result.reordered}, "
            f"altered {result.altered} (dropped at the member's own sockets: {result.member_socket_drops}); "
            f"replies received {result.replies_received}, bad {result.replies_bad}"
        )
        print(
            f"recording: {result.recorded_to_member} to the member + {result.recorded_from_member} back, "
            f"{result.recording_mismatches} differing, problems: {result.recording_problems or 'none'}"
        )
        print(
            f"latency sender -> {'member' if args.direct else 'proxy -> member'}: p50 {result.latency_p50_us:.0f} us, "
            f"p99 {result.latency_p99_us:.0f} us, max {result.latency_max_us:.0f} us"
        )
        if added is not None:
            print(
                f"latency straight to the member (run just before): p50 {added['direct_p50_us']:.0f} us, p99 "
                f"{added['direct_p99_us']:.0f} us; added by the proxy: p50 {added['added_p50_us']:.0f} us, "
                f"p99 {added['added_p99_us']:.0f} us"
            )
        print(
            f"host load average (1 min) before {result.load_average[0]:.2f}, after {result.load_average[1]:.2f} "
            f"on {os.cpu_count()} CPUs, {result.busy} busy process(es) of ours"
        )
        if not args.direct:
            summary = result.proxy_summary
            user, system = result.proxy_cpu_seconds
            print(
                f"proxy: {user + system:.1f} s CPU ({(user + system) / result.send_seconds:.0%} of one core; user "
                f"{user:.1f} s, system {system:.1f} s), socket I/O {summary.get('socketIo')}, "
                f"kernel drops {summary.get('kernelDrops')}, warnings {len(summary.get('warnings') or [])}"
            )
            if result.proxy_stderr:
                print("proxy stderr: " + result.proxy_stderr.replace("\n", "\n  "))
        print("PASS: zero lost, reordered or altered" if result.perfect else "FAIL")
    return 0 if result.perfect else 1


if __name__ == "__main__":
    sys.exit(main())
