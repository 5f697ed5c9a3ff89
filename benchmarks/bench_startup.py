"""How long `recount --help` (and other quick commands) take to start, in a fresh process each time.

Each command is run ``--runs`` times; the minimum, median and maximum wall-clock times are printed
(the minimum is the least disturbed by other load on the machine).  With ``--imports`` the slowest
imports of `cli.app` are listed too (``python -X importtime``).

    python benchmarks/bench_startup.py
    python benchmarks/bench_startup.py --runs 20 --imports --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

COMMANDS = (
    ("recount --help", [sys.executable, "-m", "cli", "--help"]),
    ("recount replay --help", [sys.executable, "-m", "cli", "replay", "--help"]),
    ("recount versions --json", [sys.executable, "-m", "cli", "versions", "--json"]),
)


def time_command(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return times


def slowest_imports(count: int) -> list[tuple[str, int]]:
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", "import cli.app"],
                            capture_output=True, text=True, check=True)
    rows = []
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        rows.append((name, int(cumulative)))
    return sorted(rows, key=lambda row: -row[1])[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--imports", action="store_true", help="list the slowest imports of cli.app")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = {}
    for label, argv in COMMANDS:
        times = time_command(argv, args.runs)
        figures[label] = {"minMs": round(min(times) * 1000), "medianMs": round(statistics.median(times) * 1000),
                          "maxMs": round(max(times) * 1000), "runs": args.runs}
    imports = slowest_imports(8) if args.imports else []
    if args.json:
        print(json.dumps({"startup": figures, "slowestImportsUs": dict(imports)}))
        return
    for label, figure in figures.items():
        print(f"{label:<26} min {figure['minMs']:>5} ms   median {figure['medianMs']:>5} ms"
              f"   max {figure['maxMs']:>5} ms   ({figure['runs']} runs)")
    for name, micros in imports:
        print(f"  import {name:<40} {micros / 1000:8.1f} ms (cumulative)")


if __name__ == "__main__":
    main()
