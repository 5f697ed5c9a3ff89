"""`recount replay` end to end, text timeline against --json, on a steady-state capture (issue 13).

Builds the steady-state capture of `bench_replay.py` (``--inbound`` inbound events), writes it as a
replay file, then runs ``recount replay FILE --json`` and ``recount replay FILE`` (the text timeline,
into a pipe) ``--runs`` times each, alternating, in fresh processes; prints the median wall time of
each, their ratio and the peak RSS.  Figures, not a test: run it on a quiet machine.

    python benchmarks/bench_timeline.py --inbound 30000 --runs 3

Figures (issue 13, a shared 2-core machine): text / json 1.10x -> 1.03x (30k inbound, 3 runs, wall).
The timeline's own cost, `cli.render_replay.print_timeline` over this capture's 30,089 trace records
into /dev/null (CPU, best of 5): into a pipe 3.45 -> 1.44 us a record, on a terminal (styled) 27.3 ->
1.77 us a record: lines built as strings, escape codes rendered once per style, a time formatted once
per millisecond, the descriptions of the periodic sends without list-building helpers.  With about one
record per inbound event in the steady state, a --json replay at the issue's 300k inbound events a
second (3.3 us an event) would put the text timeline at about 1.4x of it.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_replay  # noqa: E402
import pyarrow as pa  # noqa: E402

from formats import replay_file  # noqa: E402


def _run(arguments: list[str]) -> tuple[float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inbound", type=int, default=30_000, help="inbound events in the steady state")
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args(argv)
    events = bench_replay.capture(options.inbound, outs=True)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "steady.arrow"
        table = replay_file.events_to_table(events, source="bench")
        with pa.OSFile(str(path), "wb") as sink:
            replay_file.write_table(table, sink)
        command = [sys.executable, "-m", "cli", "replay", str(path)]
        times: dict[str, list[float]] = {"json": [], "text": []}
        peak = 0
        for _ in range(options.runs):
            for name, extra in (("json", ["--json"]), ("text", [])):
                seconds, rss = _run(command + extra)
                times[name].append(seconds)
                peak = max(peak, rss)
    json_s, text_s = statistics.median(times["json"]), statistics.median(times["text"])
    print(f"capture: {len(events):,} events ({options.inbound:,} inbound), {options.runs} run(s) each")
    print(f"recount replay --json: {json_s:.2f} s ({options.inbound / json_s:,.0f} inbound events/s, wall)")
    print(f"recount replay (text): {text_s:.2f} s ({options.inbound / text_s:,.0f} inbound events/s, wall)")
    print(f"text / json: {text_s / json_s:.2f}x (target: within 1.5x); peak RSS {peak / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
