"""Replay throughput: `engine.replay` on a long steady-state capture (issue 3, item 7).

    python benchmarks/bench_replay.py [--inbound 1000000] [--no-outs] [--profile 200000]

The capture is made in memory, no file I/O:

1. a 3-member cluster elects member 1, simulated with the engine's own `Node`s and a 1 ms router,
   recording what each member received and sent;
2. then a steady state is synthesised after it: a client message reaches the leader every 50 µs
   (one 96-byte log frame each); per message the leader appends it and sends the frame to both
   followers, each follower reports the new position (AppendPosition), the leader publishes the new
   commit position (CommitPosition).  That is 7 inbound events per client message (1 ingress, 2 log
   frames, 2 AppendPosition, 2 CommitPosition) and, unless ``--no-outs``, 6 recorded sends that the
   replay compares with what the model sends.

It then replays the whole capture (every member, comparison and invariants on) and prints inbound
events per second on one core, the same for all events, the divergence count (0 expected: the
synthesised sends are what the model sends), and a cProfile summary of a shorter run.
"""

from __future__ import annotations

import argparse
import cProfile
import heapq
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.harness.events import input_of, member_start_of
from engine.model.javarandom import JavaRandom  # noqa: E402
from engine.model.node import Node  # noqa: E402
from engine.replay import replay  # noqa: E402
from formats import cluster_codecs as c  # noqa: E402
from formats.events import Event  # noqa: E402
from formats.sbe import encode  # noqa: E402

MS = 1_000_000
US = 1_000
MEMBERS = "|".join(f"{i},localhost:2{i}001,localhost:2{i}002,localhost:2{i}003,localhost:2{i}004,localhost:2{i}005" for i in range(3))


def election(duration_ns: int = 300 * MS) -> tuple[list[Event], int]:
    """Simulate the startup election; returns the recorded events and the leader's log session id."""
    events: list[Event] = []
    delays = {0: 300 * MS, 1: 100 * MS, 2: 200 * MS}
    nodes: dict[int, Node] = {}
    in_flight: list[tuple[int, int, Event]] = []
    sequence = 0
    session_id = None

    class Scripted:
        def __init__(self, delay: int) -> None:
            self.delay = delay
            self.random = JavaRandom(0)

        def next_double(self) -> float:
            value, self.delay = ((self.delay + 0.5) / (500 * MS), None) if self.delay is not None else (self.random.next_double(), None)
            return value

    def collect(member_id: int) -> None:
        nonlocal sequence, session_id
        for output in nodes[member_id].take_outputs():
            record = output.to_json()
            if record["kind"] != "send":
                continue
            extra = {"logPosition": record["logPosition"]} if record.get("logPosition") is not None else None
            fields = output.message.to_fields()
            if record["type"] == "NewLeadershipTerm":
                session_id = fields["logSessionId"]
            events.append(Event(ts=record["ts"], node=member_id, dir="out", peer=record["peer"], channel=record["channel"],
                                type=record["type"], fields=fields, extra=extra))
            sequence += 1
            heapq.heappush(in_flight, (record["ts"] + MS, sequence, Event(
                ts=record["ts"] + MS, node=record["peer"], dir="in", peer=member_id, channel=record["channel"],
                type=record["type"], fields=fields, extra=extra)))

    for member_id in range(3):
        start = Event(ts=0, node=member_id, dir="local", peer=None, channel="local", type="MemberStart",
                      fields={"clusterMembers": MEMBERS})
        events.append(start)
        nodes[member_id] = Node(member_id, member_start_of(start), random=Scripted(delays[member_id]))
        nodes[member_id].advance(0)
        collect(member_id)
    for tick in range(MS, duration_ns + 1, MS):
        for member_id in range(3):
            nodes[member_id].advance(tick)
            collect(member_id)
        while in_flight and in_flight[0][0] <= tick:
            _, _, event = heapq.heappop(in_flight)
            events.append(event)
            nodes[event.node].step(input_of(event), event.ts)
            collect(event.node)
    states = {n: nodes[n].view().to_json() for n in nodes}
    assert all(s["electionState"] == "CLOSED" for s in states.values()), states
    assert states[1]["role"] == "LEADER" and states[1]["appendPosition"] == 96, states[1]
    return events, session_id


def steady_state(start_ns: int, messages: int, *, outs: bool, session_id: int, position: int = 96) -> list[Event]:
    """Client traffic through leader 1 to followers 0 and 2, one message every 50 µs, the log from
    ``position`` on (96: just past the election's NewLeadershipTermEvent)."""
    leader, followers = 1, (0, 2)
    events: list[Event] = []
    for i in range(messages):
        t = start_ns + i * 50 * US
        position += 96
        header = c.SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=t // MS)
        payload = encode(header) + b"\x00" * 8  # 40 bytes: a 96-byte log frame
        events.append(Event(ts=t, node=leader, dir="in", peer=None, channel="ingress", type="SessionMessageHeader",
                            fields=header.to_fields(), payload=payload))
        log_entry = c.SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=t // MS).to_fields()
        for follower in followers:
            if outs:
                events.append(Event(ts=t, node=leader, dir="out", peer=follower, channel="log", type="SessionMessageHeader",
                                    fields=log_entry, extra={"logPosition": position}))
            events.append(Event(ts=t + 20 * US, node=follower, dir="in", peer=leader, channel="log", type="SessionMessageHeader",
                                fields=log_entry, extra={"logPosition": position}))
        append = {"leadershipTermId": 0, "logPosition": position, "followerMemberId": 0, "flags": 0}
        for follower in followers:
            fields = {**append, "followerMemberId": follower}
            if outs:
                events.append(Event(ts=t + 20 * US, node=follower, dir="out", peer=leader, channel="consensus",
                                    type="AppendPosition", fields=fields))
            events.append(Event(ts=t + 40 * US, node=leader, dir="in", peer=follower, channel="consensus",
                                type="AppendPosition", fields=fields))
        commit = {"leadershipTermId": 0, "logPosition": position, "leaderMemberId": leader}
        for follower in followers:
            if outs:
                events.append(Event(ts=t + 40 * US, node=leader, dir="out", peer=follower, channel="consensus",
                                    type="CommitPosition", fields=commit))
            events.append(Event(ts=t + 60 * US, node=follower, dir="in", peer=leader, channel="consensus",
                                type="CommitPosition", fields=commit))
    return events


def capture(inbound: int, *, outs: bool) -> list[Event]:
    events, session_id = election()
    messages = -(-inbound // 7)
    return events + steady_state(400 * MS, messages, outs=outs, session_id=session_id)


def run(events: list[Event]) -> tuple[int, int, float, float]:
    """(trace records, divergences, CPU seconds of this process, wall seconds)."""
    started, cpu = time.perf_counter(), time.process_time()
    records = 0
    last = None
    for record in replay(events):
        records += 1
        last = record
    return records, last["divergences"], time.process_time() - cpu, time.perf_counter() - started


#: Where the time goes, by layer: the own time of every function, grouped by module.
LAYERS = (
    ("engine model (engine/model/node, agent, election, members, sim_parts)", ("engine/model/node.py", "engine/model/agent.py", "engine/model/election.py", "engine/model/members.py", "engine/model/sim_parts.py")),
    ("replay driver and comparison (engine/replay.py)", ("engine/replay.py",)),
    ("invariants (engine/invariants.py)", ("engine/invariants.py",)),
    ("trace encoding and hash (engine/trace.py, json, hashlib)", ("engine/trace.py", "json/", "_hashlib", "sha256")),
    ("outputs' to_json (engine/model/outputs.py)", ("engine/model/outputs.py",)),
    ("messages (formats/sbe.py, events.py, codecs)", ("formats/",)),
)


def _split(stats: pstats.Stats) -> str:
    totals = {name: 0.0 for name, _ in LAYERS}
    other = 0.0
    for (filename, _line, function), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():
        where = f"{filename}:{function}"
        for name, patterns in LAYERS:
            if any(p in where for p in patterns):
                totals[name] += tottime
                break
        else:
            other += tottime
    total = sum(totals.values()) + other
    lines = [f"  {seconds / total:6.1%}  {name}" for name, seconds in totals.items()]
    lines.append(f"  {other / total:6.1%}  everything else (builtins, sorting, heapq, bisect, ...)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inbound", type=int, default=1_000_000, help="inbound events in the steady state")
    parser.add_argument("--no-outs", action="store_true", help="record no sends (nothing to compare)")
    parser.add_argument("--profile", type=int, default=200_000, help="inbound events in the profiled run (0: none)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    events = capture(args.inbound, outs=not args.no_outs)
    inbound = sum(1 for e in events if e.dir == "in")
    print(f"capture: {len(events):,} events ({inbound:,} inbound) built in {time.perf_counter() - started:.1f}s")

    records, divergences, elapsed, wall = run(events)
    print(f"replay: {elapsed:.1f}s of CPU ({wall:.1f}s wall), {records:,} trace records, {divergences} divergences")
    print(f"  {inbound / elapsed:,.0f} inbound events/s per core ({len(events) / elapsed:,.0f} events/s all kinds)")
    print(f"  target 1,000,000 inbound events/s per core: {inbound / elapsed / 1_000_000:.1%} of it")

    if args.profile:
        sample = capture(args.profile, outs=not args.no_outs)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in replay(sample):
            pass
        profiler.disable()
        stats = pstats.Stats(profiler, stream=io.StringIO())
        print(f"\nprofile of a {args.profile:,}-inbound-event run:")
        print(_split(stats))
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(18)
        lines = text.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print("top functions by own time:")
        print("\n".join(lines[start : start + 19]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
