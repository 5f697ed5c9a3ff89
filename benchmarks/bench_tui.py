"""How fast `recount tui` is on a big replay (issue 5 item 6): first screen, index, seeks, steps back.

    python benchmarks/bench_tui.py [--events 1000000] [--block 1000] [--seeks 1000] [--keep FILE]

The replay: the bundled clean-start sample (a 3-member startup election and client traffic), then
its last 200 ms of steady state (AppendPosition / CommitPosition heartbeats, sent and received)
repeated until the file holds ``--events`` events, then the members' End.  It is built column-wise
with pyarrow (no event is decoded to build it) and written to a temporary .arrow file, which the
TUI then opens memory-mapped like any replay.

Printed figures (targets from the issue: first screen < 1 s, any seek or step back < 50 ms p99):
* first screen: from opening the file to the first frame of the app drawn (200×50, headless: the
  moment its first refresh completes, when it starts the index worker), and to the app's first idle
  moment with that worker running;
* index: the one replay pass in the background worker (events/s), checkpoints taken;
* seek: `Session.moment(k)` for random k (state after event k and after k-1, every member);
* step back: `moment(k - 1)` right after `moment(k)` (re-execution from the nearest checkpoint);
* step forward: `moment(k + 1)` right after `moment(k)` (one more event on the live stepper);
* UI seek: setting the app's cursor and waiting for the redraw (list, timeline, inspector).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cli.tui.app import RecountApp  # noqa: E402
from cli.tui.session import Session  # noqa: E402
from formats import replay_file  # noqa: E402

SAMPLE = ROOT / "samples" / "clean-start" / "incident.arrow"
PERIOD_NS = 200_000_000


def build_replay(events: int, path: Path) -> int:
    """Write a replay of about ``events`` events to ``path``; returns the exact count."""
    table = replay_file.read_table(pa.memory_map(str(SAMPLE)), name=str(SAMPLE))
    ts = table.column("ts").to_numpy()
    kinds = table.column("type").cast(pa.string()).to_pylist()
    end_rows = [i for i, kind in enumerate(kinds) if kind == "End"]
    body = np.array([i for i in range(len(kinds)) if kinds[i] != "End"])
    last = int(ts[body[-1]])
    # The last full heartbeat period before the end: rows whose time falls in it.
    cycle = body[(ts[body] > last - PERIOD_NS) & (ts[body] <= last)]
    cycle_kinds = {kinds[i] for i in cycle}
    assert cycle_kinds <= {"AppendPosition", "CommitPosition"}, cycle_kinds
    repeats = max(0, (events - len(body) - len(end_rows)) // len(cycle))
    rows = np.concatenate([body, np.tile(cycle, repeats), np.array(end_rows)])
    shift = np.concatenate(
        [
            np.zeros(len(body), np.int64),
            np.repeat(np.arange(1, repeats + 1, dtype=np.int64) * PERIOD_NS, len(cycle)),
            np.full(len(end_rows), (repeats + 1) * PERIOD_NS, np.int64),
        ]
    )
    big = table.take(pa.array(rows))
    big = big.set_column(big.schema.get_field_index("ts"), "ts", pa.array(ts[rows] + shift, type=pa.int64()))
    big = big.set_column(
        big.schema.get_field_index("seq"), "seq", pa.array(np.arange(len(rows), dtype=np.uint64))
    )
    big = big.replace_schema_metadata(table.schema.metadata)
    with pa.OSFile(str(path), "wb") as sink:
        replay_file.write_table(big, sink)
    return len(rows)


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    if not ordered:
        return "-"

    def at(q: float) -> float:
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000

    return f"p50 {at(0.5):.1f} ms  p99 {at(0.99):.1f} ms  max {ordered[-1] * 1000:.1f} ms  (n={len(ordered)})"


async def first_screen(path: Path, block: int) -> tuple[float, RecountApp, float]:
    started = time.perf_counter()
    session = Session.open(path, block_size=block)
    app = RecountApp(session)
    # The app starts its index worker right after the first refresh (call_after_refresh): that moment
    # is the first screen drawn.  pilot.pause() returns later, when the app is idle, which with the
    # index thread already running is not what a user waits for; both are printed.
    first_frame: list[float] = []
    start_index = app._start_index

    def on_first_refresh() -> None:
        first_frame.append(time.perf_counter() - started)
        start_index()

    app._start_index = on_first_refresh
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        idle = time.perf_counter() - started
        drawn = first_frame[0] if first_frame else idle
        app.first_idle = idle  # type: ignore[attr-defined]
        index_started = time.perf_counter()
        await app.wait_until_indexed()
        indexed = time.perf_counter() - index_started
        await pilot.pause()
        rng = random.Random(7)
        ui = []
        for _ in range(100):
            k = rng.randrange(len(session))
            t = time.perf_counter()
            app.cursor = k
            await pilot.pause()
            ui.append(time.perf_counter() - t)
        app.ui_seeks = ui  # type: ignore[attr-defined]
    return drawn, app, indexed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--block", type=int, default=500, help="events between engine checkpoints")
    parser.add_argument("--seeks", type=int, default=1000)
    parser.add_argument("--keep", help="also keep the generated replay at this path")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        path = Path(args.keep) if args.keep else Path(directory) / "big.arrow"
        t = time.perf_counter()
        count = build_replay(args.events, path)
        print(
            f"replay: {count} events, {path.stat().st_size / 1e6:.1f} MB, built in {time.perf_counter() - t:.1f} s"
        )

        drawn, app, indexed = asyncio.run(first_screen(path, args.block))
        session = app.session
        index = session.index
        print(f"first screen: {drawn * 1000:.0f} ms drawn (target < 1000 ms); app first idle, index running: "
              f"{app.first_idle * 1000:.0f} ms")
        print(
            f"index: {indexed:.1f} s in the background worker ({count / indexed:,.0f} events/s), "
            f"{len(index.checkpoints)} checkpoints every {args.block} events, "
            f"{len(index.notable)} events with notable records, {len(index.problems)} problems"
        )
        print(f"UI seek (cursor set → redrawn): {percentiles(app.ui_seeks)}")

        rng = random.Random(1)
        measured: dict[str, tuple[list[float], list[float]]] = {
            name: ([], []) for name in ("seek", "back", "forward")
        }

        def timed(name: str, position: int) -> None:
            wall, cpu = time.perf_counter(), time.process_time()
            session.moment(position)
            measured[name][0].append(time.perf_counter() - wall)
            measured[name][1].append(time.process_time() - cpu)

        for _ in range(args.seeks):
            k = rng.randrange(1, count - 1)
            timed("seek", k)
            timed("back", k - 1)
            timed("forward", k)
        labels = {
            "seek": "seek (state after a random event)",
            "back": "step back one event",
            "forward": "step forward one event",
        }
        for name, label in labels.items():
            wall, cpu = measured[name]
            print(f"{label:35} wall {percentiles(wall)}")
            print(f"{'':35} cpu  {percentiles(cpu)}")
        print(f"load average while measuring: {os.getloadavg()[0]:.1f}")
        print(f"cpu: {os.cpu_count()} cores; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
