"""Instructions the compiled steady-state lane loop executes on a small replay file (valgrind's callgrind).

Timings of a few per cent drown in a shared machine's noise; instruction counts do not (the same file,
``PYTHONHASHSEED=0``: the same count from run to run).  This writes (once, into ``--dir``) the replay file of
`bench_replay_file.py` with ``--events`` events, replays it in process through the lane in a child under
callgrind, and prints the instructions spent inside `engine._window.run`, what it calls included.

    python benchmarks/bench_lane_instructions.py                      # this tree
    python benchmarks/bench_lane_instructions.py --tree /work/other   # another checkout, built in place

Needs valgrind (Debian's package) and the compiled module built in the tree (``python setup.py build_ext
--inplace``).  Eleventh session (issue 13), 60k events: 713.6M instructions (the loop as first merged) ->
590.4M (a pair's series held once a chunk, passed checks settled in the loop, no Python call to push a
frame, note a commit or find a made message).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = """
import sys
from cli.app import tune_collector
tune_collector()  # the collector as the command sets it
from cli.commands.replay import open_replay_file
from engine.replay import ReplaySession
from engine.steady import SteadyLane
source = open_replay_file(sys.argv[1]).ordered(None)
chunks = list(source.lane_chunks(0))
session = ReplaySession(source)
lane = SteadyLane(session._driver, session._sent_record_at)
session.steady = lane
for _ in session._lane_out(lane, iter(chunks), as_records=False):
    pass
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=HERE.parent, help="the checkout to measure (default: this one)")
    parser.add_argument("--events", type=int, default=60_000)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "recount-bench")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    import bench_replay_file

    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / f"bench_replay_file-{args.events}.arrow"
    if not path.exists():
        bench_replay_file.write_file(path, args.events)
    environment = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(args.tree)}
    with tempfile.TemporaryDirectory() as work:
        out = Path(work) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", CHILD,
                        str(path)], env=environment, cwd=args.tree, check=True, capture_output=True)
        report = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)], check=True,
                                capture_output=True, text=True).stdout
    found = re.search(r"^\s*([\d,]+) .*__pyx_pw_\w*_window_\w*run\b", report, re.MULTILINE)
    if found is None:
        print(f"{args.tree}: the compiled loop did not run (is engine._window built there?)", file=sys.stderr)
        return 1
    print(f"compiled loop: {int(found.group(1).replace(',', '')):,} instructions ({args.events:,} events)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
