"""Long runs of the seeded property loop (issue 11, item 6): random incidents through the simulator.

    python benchmarks/simulation_properties.py --seeds 2000                 # low load, seeds 0..1999
    python benchmarks/simulation_properties.py --load high --seeds 100 --first 1000
    python benchmarks/simulation_properties.py --seed 123 --load low        # one seed, its scenario printed
    python benchmarks/simulation_properties.py --seeds 500 --keep           # failing seeds -> tests/testdata/simulation/

Each seed is one incident (`tests/simulation_properties.scenario_for`): it is simulated, its output
replayed node by node, and held to the Raft invariants and to zero divergences.  Prints every failing
seed with its first divergences or broken invariants, then the figures (runs, failures, elections,
publication evidence seen, seconds per run), and exits 1 if a seed failed.  The test suite runs the
first 200 low-load and 4 high-load seeds (`tests/test_simulation_properties.py`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.simulation_properties import LOADS, REGRESSIONS, check_seed, scenario_for  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200, help="how many seeds (default 200)")
    parser.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--seed", type=int, help="run this one seed and print its scenario")
    parser.add_argument("--load", choices=(*LOADS, "both"), default="low", help="client load (default low)")
    parser.add_argument("--keep", action="store_true", help="write each failing seed's scenario to " + str(REGRESSIONS))
    args = parser.parse_args()

    loads = LOADS if args.load == "both" else (args.load,)
    seeds = [args.seed] if args.seed is not None else list(range(args.first, args.first + args.seeds))
    failed = 0
    for load in loads:
        started = time.perf_counter()
        runs = elections = disconnections = behind = 0
        for seed in seeds:
            if args.seed is not None:
                print(scenario_for(seed, load))
            outcome = check_seed(seed, load)
            runs += 1
            elections += outcome.elections
            disconnections += outcome.disconnections
            behind += outcome.sender_behind
            if not outcome.holds:
                failed += 1
                print(f"FAIL seed {seed} ({load}): {outcome.describe()}", flush=True)
                if args.keep:
                    REGRESSIONS.mkdir(parents=True, exist_ok=True)
                    path = REGRESSIONS / f"seed-{load}-{seed}.toml"
                    path.write_text(f"# Regression: seed {seed} at {load} load failed: {outcome.describe()}\n"
                                    + scenario_for(seed, load))
                    print(f"  kept as {path}", flush=True)
        seconds = time.perf_counter() - started
        print(f"{load} load: {runs} runs, {failed} failed, {elections} elections, {disconnections} publications"
              f" disconnected, {behind} senders fallen behind; {seconds:.1f} s ({seconds / max(runs, 1):.2f} s a run)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
