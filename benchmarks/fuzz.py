"""Long fuzz runs over every reader of user files (issue 14, item 2).

    python benchmarks/fuzz.py --minutes 10                 # every reader, the time shared out
    python benchmarks/fuzz.py --minutes 2 --reader replay --seed 7
    python benchmarks/fuzz.py --minutes 10 --keep          # write each failing input to tests/testdata/fuzz/

The mutation fuzzer is `tests/fuzzing.py` (the same one the test suite runs for a few seconds per
reader, with seed 0).  Every reader gets an equal share of the time, in turn; readers built on pyarrow
run in a child process so that a segfault is reported, not fatal.  It prints the inputs tried per
reader and every failure (any result other than success or a DecodeError), and exits 1 if there was
one.  Inputs are deterministic from (reader, seed, index): a failure is reproduced with
``python -c "from tests.fuzzing import make_input; ..."`` or kept with ``--keep``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import fuzzing  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0, help="total time, shared by the readers")
    parser.add_argument("--reader", action="append", choices=sorted(fuzzing.READERS),
                        help="only this reader (repeatable); default every reader")
    parser.add_argument("--seed", type=int, default=1, help="run seed (the test suite uses 0)")
    parser.add_argument("--keep", action="store_true", help="write failing inputs under tests/testdata/fuzz/")
    args = parser.parse_args()

    names = args.reader or list(fuzzing.READERS)
    share = args.minutes * 60 / len(names)
    print(f"fuzzing {len(names)} readers, {share:.0f} s each, seed {args.seed}", file=sys.stderr)
    rows = []
    all_failures = []
    for name in names:
        started = time.monotonic()
        tried, failures = fuzzing.fuzz(name, seed=args.seed, seconds=share, isolated=True)
        elapsed = time.monotonic() - started
        rows.append((name, tried, len(fuzzing.seeds(name)), elapsed, len(failures)))
        print(f"  {name:14} {tried:8} inputs  {tried / elapsed:8.1f}/s  {len(failures)} failures", file=sys.stderr)
        for failure in failures:
            print(f"    FAIL {failure.describe()}", file=sys.stderr)
            if args.keep:
                print(f"      kept as {fuzzing.keep(failure).relative_to(ROOT)}", file=sys.stderr)
        all_failures += failures

    print(f"{'reader':14} {'seeds':>5} {'inputs':>8} {'per s':>8} {'failures':>8}")
    for name, tried, seed_count, elapsed, failed in rows:
        print(f"{name:14} {seed_count:5} {tried:8} {tried / elapsed:8.1f} {failed:8}")
    print(f"{'total':14} {'':5} {sum(r[1] for r in rows):8} {'':8} {len(all_failures):8}")
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main())
