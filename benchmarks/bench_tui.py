"""How `recount tui` holds up on a production-size replay (issue 15 item 1): memory, index, seeks, quit.

    python benchmarks/bench_tui.py [--events 1000000] [--keep DIR] [--seeks 200]
    python benchmarks/bench_tui.py --events 10000000 --keep /tmp/tui10m      (what 10M events need)

The replay is generated, then measured in fresh processes (so that peak memory is the TUI's own):

* 1M events and fewer: `recount simulate` runs a cluster of 3 under a client sending 1,000 messages
  a second (each one an ingress message, log frames to both followers and their AppendPositions, every
  one captured as sent and as received), with a follower killed and restarted and then the leader
  killed and restarted: two elections, a catch-up, and, where the model is short of Aeron, divergences.
* More than 1M: that incident, repeated back to back (each copy a whole new cluster, shifted in time
  and renumbered), until the file holds ``--events`` events.

Figures, each against the issue's target:

* first screen: from opening the file to the first frame drawn (100x30, headless);
* index: the background replay of every event (events/s, time to finish; target < 60 s, or answers
  correct for the part indexed with the rest said to be pending);
* during indexing: UI seeks to random events, indexed or not, and what ``d`` says past the indexed part;
* UI seeks once indexed: random jumps (forward and back), ``k`` (one step back), ``d`` / ``D`` (next /
  previous divergence), ``s`` / ``S``: from the key to the screen settled, p50/p99/max (target p99 < 200 ms),
  and, for any that took over 100 ms, whether the status bar said ``seeking…`` while it lasted;
* peak memory: the process's maximum resident set (target < 1.5 GB);
* quit: from ``q`` to the process gone, during indexing and after it (target < 1 s).

Measured 2026-11-25 on the 1.06M-event replay (2 shared cores, load average 3.7-5.8 from other work:
wall figures are CPU time plus waiting for a core), p50 / p99 in ms, before (checkpoints every 500,
'seeking…' after 100 ms) and after (checkpoints every 200, one re-execution for the screenful around
the cursor, 'seeking…' at once, landmarks worked out ahead), two runs after:

    jump      343 / 1904   ->   177 / 724,   93 / 588
    jump back 318 / 2033   ->   158 / 752,   86 / 364
    k         166 / 1354   ->    26 / 505,   29 / 548
    s / S     179 / 1877, 44 / 289  ->  87 / 1814, 75 / 666;  84 / 812, 75 / 477
    d / D     355 / 355, 583 / 9774 ->  1532 / 1532, 150 / 1918;  125 / 125, 45 / 294   (n = 2 and 7)
    over 100 ms with 'seeking…' shown: 235 of 469  ->  376 of 383, 165 of 172
    index 276 s wall (load ~7) -> 173 s, 216 s wall; 93-101 s of CPU; peak memory 543 -> 632, 595 MB;
    first screen 1562 -> 1265, 1123 ms; quit while indexing 712, 659 ms after (not measured before).

Then (the sixth session, machine quiet, load 0.4-1.2; p50 / p99 ms): the index freezes what it built out of
the garbage collector's view every 20,000 events (full collections had been the slowest seeks), recount
runs the collector at (50000, 10, 10), moments convert views when asked, a seek prepares half a screen
either way, and heavy steps get a checkpoint (and their records kept) after them:

    jump 55-58 / 123-135, jump back 53-60 / 121-172, k 9 / 56-64, d 70-74, D 26-29 / 46-275 (n = 7),
    s 23 / 127-241 (n = 15), S 22-25 / 55-67; moves over 200 ms: 2-5 of 487; over 100 ms with
    'seeking…' shown: 19 of 19, 24 of 25; index 56.5-58.6 s of CPU (55.7-57.7 s wall); peak memory
    591-601 MB; first screen 0.49-0.63 s; quit 109-157 ms while indexing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZE = (100, 30)
#: Events per simulated second of the 1 kHz load (measured: 1.03M events in 105 s, 100 s of load).
EVENTS_PER_LOADED_SECOND = 10_000


# -- the replay ----------------------------------------------------------------------------------------


def scenario(events: int) -> str:
    load_s = max(4, round(events / EVENTS_PER_LOADED_SECOND))
    crash, back = 0.3 * load_s, 0.4 * load_s
    leader, leader_back = 0.6 * load_s, 0.7 * load_s
    return textwrap.dedent(f"""\
        name = "bench-tui"
        description = "{load_s} s of client traffic at 1 kHz; a follower killed and restarted, then the leader"
        seed = 11
        duration = "{load_s + 15}s"
        [[client]]
        start = "1s"
        every = "1ms"
        count = {min(100_000, load_s * 1000)}
        size = 40
        [[fault]]
        at = "{crash:.1f}s"
        kind = "crash"
        member = "follower"
        [[fault]]
        at = "{back:.1f}s"
        kind = "restart"
        member = "crashed"
        [[fault]]
        at = "{leader:.1f}s"
        kind = "crash"
        member = "leader"
        [[fault]]
        at = "{leader_back:.1f}s"
        kind = "restart"
        member = "crashed"
        """)


def simulate(events: int, directory: Path) -> Path:
    """One simulated incident of about ``events`` events (at most ~1.1M: the client sends 100k messages)."""
    out = directory / "incident"
    replay = out / "incident.arrow"
    if replay.exists():
        return replay
    directory.mkdir(parents=True, exist_ok=True)
    toml = directory / "scenario.toml"
    toml.write_text(scenario(min(events, 1_050_000)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "cli", "simulate", str(toml), "-o", str(out), "--force"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return replay


def repeat(base: Path, events: int, path: Path) -> int:
    """``base`` repeated back to back (each copy a new cluster: its own MemberStarts, 1 s after the last
    copy's end, seq renumbered; the Ends only at the very end) until ``events`` events."""
    import numpy as np
    import pyarrow as pa

    from formats import replay_file

    table = replay_file.read_table(pa.memory_map(str(base)), name=str(base))
    kinds = table.column("type").cast(pa.string()).to_numpy(zero_copy_only=False)
    body = table.filter(pa.array(kinds != "End"))
    ends = table.filter(pa.array(kinds == "End"))
    ts = body.column("ts").to_numpy()
    span = int(ts.max() - ts.min()) + 1_000_000_000
    copies = max(1, -(-(events - ends.num_rows) // body.num_rows))
    parts = []
    for copy in range(copies):
        part = body.set_column(body.schema.get_field_index("ts"), "ts", pa.array(ts + copy * span, pa.int64()))
        parts.append(part)
    end_ts = ends.column("ts").to_numpy() + (copies - 1) * span
    parts.append(ends.set_column(ends.schema.get_field_index("ts"), "ts", pa.array(end_ts, pa.int64())))
    big = pa.concat_tables(parts)
    big = big.set_column(big.schema.get_field_index("seq"), "seq", pa.array(np.arange(big.num_rows, dtype=np.uint64)))
    big = big.replace_schema_metadata(table.schema.metadata)
    with pa.OSFile(str(path), "wb") as sink:
        replay_file.write_table(big, sink, compression="zstd")
    return big.num_rows


def build(events: int, directory: Path) -> Path:
    if events <= 1_100_000:
        return simulate(events, directory)
    path = directory / f"repeated-{events}.arrow"
    if not path.exists():
        repeat(simulate(1_000_000, directory), events, path)
    return path


# -- measuring, in a fresh process ------------------------------------------------------------------


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    if not ordered:
        return "-"

    def at(q: float) -> float:
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000

    return f"p50 {at(0.5):.0f} ms  p99 {at(0.99):.0f} ms  max {ordered[-1] * 1000:.0f} ms  (n={len(ordered)})"


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def _settle(app, pilot, seen: list[str]) -> None:
    """Wait until the app has drawn the answer to the last key (a seek in a worker included), noting
    what the status bar said meanwhile."""
    await pilot.pause()
    while getattr(app, "seek_pending", False):
        seen.append(str(app.query_one("#status").render()))
        await asyncio.sleep(0.01)
    await pilot.pause()


async def _timed(app, pilot, action, samples: list[float], slow_marked: list[bool]) -> None:
    """One move: how long from the app taking it (the cursor or member set) to its answer drawn, as
    the app logs it (`RecountApp.seek_log`; Pilot's own key posting and idle waits left out), or, for
    an app without that log, from the key sent to the screen settled."""
    seen: list[str] = []
    log = getattr(app, "seek_log", None)
    logged = len(log) if log is not None else 0
    start = time.perf_counter()
    await action()
    await _settle(app, pilot, seen)
    if log is not None:
        for _ in range(100):
            if len(log) > logged:
                break
            await asyncio.sleep(0.005)
            await pilot.pause()
        if len(log) == logged:
            return  # the key moved nothing (no later divergence, say): nothing to time
        took, noticed = log[-1]
    else:
        took, noticed = time.perf_counter() - start, any("seeking" in text for text in seen)
    samples.append(took)
    if took > 0.1:
        slow_marked.append(noticed)


async def measure_ui(path: Path, seeks: int, out: dict) -> None:
    from cli.tui.app import RecountApp
    from cli.tui.session import Session

    started = time.perf_counter()
    session = Session.open(path)
    out["open_s"] = time.perf_counter() - started
    out["events"] = len(session)
    app = RecountApp(session)
    first: list[float] = []
    start_index = app._start_index

    def on_first_refresh() -> None:
        first.append(time.perf_counter() - started)
        start_index()

    app._start_index = on_first_refresh
    rng = random.Random(7)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        out["first_screen_s"] = first[0] if first else time.perf_counter() - started
        index_started = time.perf_counter()
        index_cpu = time.process_time()
        out["load_at_start"] = os.getloadavg()[0]
        # -- while indexing
        during: list[float] = []
        during_marked: list[bool] = []
        await asyncio.sleep(3)
        if not session.index.finished:
            for _ in range(20):
                k = rng.randrange(len(session))

                async def go(k=k) -> None:
                    app.go_to(k)

                await _timed(app, pilot, go, during, during_marked)
            out["indexed_at_probe"] = session.index.done
            app.go_to(max(session.index.done - 1, 0))
            await _settle(app, pilot, [])
            app.message = ""
            await pilot.press("d")
            await _settle(app, pilot, [])
            out["d_past_indexed_says"] = app.message
        out["during_index_seek"] = during
        out["during_index_slow_marked"] = during_marked
        await app.wait_until_indexed()
        out["index_s"] = time.perf_counter() - index_started
        out["index_cpu_s"] = time.process_time() - index_cpu  # the UI's own share included (idle, mostly)
        out["load_after_index"] = os.getloadavg()[0]
        out["checkpoints"] = len(session.index.checkpoints)
        out["problems"] = len(session.index.problems)
        out["rss_after_index_mb"] = _rss_mb()
        await pilot.pause()
        # -- once indexed
        results: dict[str, list[float]] = {n: [] for n in ("jump", "back_jump", "k", "d", "D", "s", "S")}
        marked: list[bool] = []
        seeks_cpu, seeks_wall = time.process_time(), time.perf_counter()
        for _ in range(seeks):
            k = rng.randrange(len(session))

            async def go(k=k) -> None:
                app.go_to(k)

            await _timed(app, pilot, go, results["jump"], marked)
            back = rng.randrange(max(k, 1))

            async def go_back(back=back) -> None:
                app.go_to(back)

            await _timed(app, pilot, go_back, results["back_jump"], marked)
        problems = session.index.problem_positions or [len(session) // 2]
        changes = session.index.changes or [len(session) // 2]
        # start where the key has somewhere to go: before the last divergence for d, after the first for D
        starts = {"k": (1, len(session)), "d": (0, problems[-1]), "D": (problems[0] + 1, len(session)),
                  "s": (0, changes[-1]), "S": (changes[0] + 1, len(session))}
        for key, count in (("k", 50), ("d", 50), ("D", 50), ("s", 30), ("S", 30)):
            low, high = starts[key]
            app.go_to(rng.randrange(low, max(high, low + 1)))
            await _settle(app, pilot, [])
            for _ in range(count):
                await _timed(app, pilot, lambda key=key: pilot.press(key), results[key], marked)
        out["seeks"] = results
        out["slow_marked"] = marked
        # CPU of the whole process (the app's threads and Pilot driving it) per move: on a loaded machine
        # the wall figures above are this plus waiting for a core.
        moves = sum(len(v) for v in results.values())
        out["seeks_cpu_per_move_ms"] = (time.process_time() - seeks_cpu) * 1000 / max(moves, 1)
        out["seeks_wall_per_move_ms"] = (time.perf_counter() - seeks_wall) * 1000 / max(moves, 1)
        out["load_after_seeks"] = os.getloadavg()[0]
        out["rss_now_mb"] = _rss_mb()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_quit(path: Path, after_index: bool) -> None:
    """Run the app headless, press q (after 5 s of indexing, or once indexed) and print when; the parent
    times the process's exit from that moment."""
    from cli.tui.app import RecountApp
    from cli.tui.session import Session

    app = RecountApp(Session.open(path))

    async def pilot(pilot) -> None:
        if after_index:
            await app.wait_until_indexed()
        else:
            await asyncio.sleep(5)
        await pilot.pause()
        print(json.dumps({"q_at": time.time(), "indexed": app.session.index.done}), flush=True)
        await pilot.press("q")

    app.run(headless=True, size=SIZE, auto_pilot=pilot)


def child(args: list[str]) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    proc.wait()
    ended = time.time()
    return (json.loads(line) if line.strip() else {}), ended


def report(path: Path, seeks: int, quit_after_index: bool = True) -> None:
    info, _ = child(["--measure-ui", str(path), "--seeks", str(seeks)])
    events = info["events"]
    print(f"replay: {path} — {events:,} events, {path.stat().st_size / 1e6:.0f} MB on disk")
    print(f"first screen: {info['first_screen_s'] * 1000:.0f} ms drawn (file opened in {info['open_s'] * 1000:.0f} ms)")
    print(f"index: {info['index_s']:.1f} s in the background ({events / info['index_s']:,.0f} events/s), "
          f"{info['checkpoints']} checkpoints, {info['problems']} divergences/invariant violations "
          f"(target < 60 s, or incremental with the rest said to be pending); "
          f"{info['index_cpu_s']:.1f} s of CPU; load average {info['load_at_start']:.1f} before, "
          f"{info['load_after_index']:.1f} after")
    if info.get("during_index_seek"):
        slow = info["during_index_slow_marked"]
        print(f"  while indexing (at {info['indexed_at_probe']:,} of {events:,}): UI seek "
              f"{percentiles(info['during_index_seek'])}; over 100 ms: {len(slow)}, 'seeking…' shown for "
              f"{sum(slow)}")
        print(f"  d past the indexed part says: {info['d_past_indexed_says']!r}")
    labels = {"jump": "jump to a random event", "back_jump": "jump back to an earlier event",
              "k": "k (step back one event)", "d": "d (next divergence)", "D": "D (previous divergence)",
              "s": "s (next state change)", "S": "S (previous state change)"}
    for name, label in labels.items():
        print(f"  {label:32} {percentiles(info['seeks'][name])}  (target p99 < 200 ms)")
    marked = info["slow_marked"]
    print(f"  UI actions over 100 ms once indexed: {len(marked)}, 'seeking…' shown for {sum(marked)}")
    print(f"  per move, the whole process (app and Pilot): {info['seeks_cpu_per_move_ms']:.0f} ms of CPU, "
          f"{info['seeks_wall_per_move_ms']:.0f} ms of wall time; load average {info['load_after_seeks']:.1f} after")
    print(f"memory: peak {info['peak_rss_mb']:.0f} MB resident (target < 1500 MB); after indexing "
          f"{info['rss_after_index_mb']:.0f} MB")
    for after in (False, True) if quit_after_index else (False,):
        quit_info, ended = child(["--measure-quit", str(path)] + (["--after-index"] if after else []))
        if "q_at" in quit_info:
            print(f"quit {'once indexed' if after else 'while indexing (' + format(quit_info['indexed'], ',') + ' indexed)'}: "
                  f"{(ended - quit_info['q_at']) * 1000:.0f} ms from q to the process gone (target < 1000 ms)")
    print(f"load average: {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores; python {sys.version.split()[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seeks", type=int, default=200, help="random jumps (and as many jumps back) once indexed")
    parser.add_argument("--keep", help="directory to build the replay in and keep it (reused when there)")
    parser.add_argument("--replay", help="measure this replay file instead of generating one")
    parser.add_argument("--no-quit-after-index", action="store_true",
                        help="skip timing q once indexed (it indexes the whole replay a second time)")
    parser.add_argument("--measure-ui", help=argparse.SUPPRESS)
    parser.add_argument("--measure-quit", help=argparse.SUPPRESS)
    parser.add_argument("--after-index", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_ui or args.measure_quit:
        from cli.app import tune_collector

        tune_collector()  # as `recount tui` runs
    if args.measure_ui:
        out: dict = {}
        asyncio.run(measure_ui(Path(args.measure_ui), args.seeks, out))
        print(json.dumps(out), flush=True)
        return
    if args.measure_quit:
        measure_quit(Path(args.measure_quit), args.after_index)
        return
    if args.replay:
        report(Path(args.replay), args.seeks, not args.no_quit_after_index)
        return
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(args.keep) if args.keep else Path(scratch)
        t = time.perf_counter()
        path = build(args.events, directory)
        print(f"built in {time.perf_counter() - t:.0f} s")
        report(path, args.seeks, not args.no_quit_after_index)


if __name__ == "__main__":
    main()
