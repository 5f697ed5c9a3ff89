"""`recount replay FILE.arrow` end to end on a production-size replay file: throughput and peak memory.

    python benchmarks/bench_replay_file.py --events 1000000
    python benchmarks/bench_replay_file.py --events 10000000 --runs 1 --modes json
    python benchmarks/bench_replay_file.py --events 1000000 --before /tmp/base --runs 3   # paired, alternating

1. Writes a real replay file of ``--events`` events (kept in ``--dir`` and reused): the startup
   election and steady-state traffic of `bench_replay.py` (per client message 7 inbound events and 6
   recorded sends), in ``ts`` order as `recount convert` writes it, generated and written a chunk at a
   time (the file can be far larger than memory would hold as events).
2. Runs ``recount replay FILE --json`` (and ``recount replay FILE``, the text timeline into a pipe) in
   fresh processes, ``--runs`` times each, alternating with the same commands of the tree given by
   ``--before`` (a checkout of another commit) when there is one, so that a shared machine's noise
   falls on both alike.
3. Prints, per tree and mode, the median wall and CPU time, inbound events per second of CPU (per
   core: the replay is single-threaded), the peak resident set (the kernel's high-water mark of the
   process, VmHWM) and the peaks of its anonymous and file-backed parts (sampled every 0.2 s from
   /proc: a memory-mapped file's pages count in the second), and the text / json ratio.

Figures, not a test: run it on a quiet machine.  The trace's sha256 of each run is printed too (the
``summary`` record's ``traceSha256``): both trees must agree.

``--profile`` instead runs the streamed replay (`recorder.convert.ReplayFileInput` into
`engine.replay.replay_lines`) in this process under cProfile and prints where the time goes, by layer
(reading the file, the model, the comparison, invariants, trace encoding, messages); ``--memory`` runs
it under tracemalloc and prints what is allocated and still held at the end (and at the middle), by
module: what the memory that grows with the file is.

Figures with the steady-state lane (`engine.steady`; issue 13, seventh session, load about 1):

    500k events, paired with 37224e0 (3 runs, medians, CPU):  --json 13.1 s -> 3.5 s (20,476 -> 76,271
        inbound ev/s), 356 -> 243 MB;  text 14.5 s -> 4.7 s (18,513 -> 57,226), 355 -> 254 MB;
        text / json 1.11x -> 1.33x.  Same trace sha256 (0d76bce1...).
    10M events (one run):  --json 72.4 s (74,334 inbound ev/s), 287 MB (221 / 73);  text 89.6 s, 297 MB;
        text / json 1.24x.  Same trace sha256 (373b78ce...).

Eighth session (issue 13; load about 1, paired with 1663d48, 3 runs, medians, CPU): the lane's frames as
tuples, typed columns by itemgetter, a comparison run begun without re-checking the last (callgrind on
the 60k/120k files: 49,563 -> 45,576 instructions per steady event):

    500k events:  --json 4.6 s -> 4.3 s (58,397 -> 62,872 inbound ev/s), 244 -> 243 MB;  text 5.8 s -> 5.5 s
        (46,649 -> 49,078);  text / json 1.28x.  Same trace sha256 (0d76bce1...).
    10M events (one run, the machine slower that day than the seventh session's):  --json 83.4 s
        (64,539 inbound ev/s), 287 MB (222 / 68).  Same trace sha256 (373b78ce...).

Where the lane's time goes (500k events, `SteadyLane.run` alone): 2.29 s with the comparison, 1.17 s
without it (``compare=False``), the rows 0.55 s.  Of the comparison, a new run's `_Run` object is the
largest single part (each compared send starts one, on each side).  Compiling `engine/steady.py` as it
is with mypyc took the lane from 2.29 to 1.95 s and the rows from 0.57 to 0.39 s: the lane works on
interpreted objects (agents, nodes, the comparison's series), which a compiled module still reaches
through the generic attribute protocol.

The lane's model side, fewer calls per event (issue 13, helper session i13model; load 1.5-4, paired with
cf58845): each handler looks its member's steady record (role, agent, node, log, peers) up once and reads
the message's values in one helper, the member's time and the cycle's entry are one call (`_enter`, the
last check before anything changes), causes are made once, and the prologue skips looking for frame
batches to feed at the instant of the row before.  500k events:

    `SteadyLane.run` alone (5 alternating pairs, medians of best-of-3):  2.47 -> 1.94 s (per pair 0.78x,
        0.77-0.84x);  with ``compare=False`` 1.19 -> 0.88 s (0.74x, 0.72-0.78x).
    --json end to end (5 runs, CPU medians):  4.1 s -> 3.6 s (65,209 -> 73,978 inbound ev/s), 244 -> 243 MB.
        Same trace sha256 (0d76bce1...).
    callgrind, instructions per event of the in-process run (rows and lane; the 90k-event file less the
        30k one, PYTHONHASHSEED=0):  47,003 -> 41,446;  34,606 -> 29,320-29,354 with ``compare=False``.

Where the model side's time goes now (py-spy, ``compare=False``): the trace lines' ``%`` formatting 16-18 %
(inherent: writing the constant fields in beforehand, by a cache of part-filled templates, saved about 1 %
and was dropped, as was converting each value to text once per event, which is slower), the row loop's
prologue and dispatch 17 %, the rest spread over the handlers at 1-7 % each.  Passing the steady record
itself to `_leader_position` / `_follower_work` with a precomputed median flag measured no fewer
instructions (dropped).

Figures (issue 13, the memory session; a shared 2-core machine, load 2-4, one run each; peak VmHWM with its
sampled anonymous / file-backed peaks, CPU seconds):

    10M events (5.38M inbound, 2.9 GB):  --json 651 MB (588 / 69), 337 s  ->  374 MB (309 / 68), 296 s;
                                         text   376 MB (312 / 68), 312 s (text / json 1.05x)
    1.5M events:  --json 371 MB (306 / 66)  ->  336 MB;     500k events:  352 MB (287 / 66)  ->  346 MB

What grew with the file (about 33 MB a million events): every member's log recording
(`engine.model.sim_parts.LogStore` keeps each frame's end and message for the whole replay), each
member holding its own copy of every message and an int object per frame.  Now the rows that carry
one message give one object (`formats.replay_file.ColumnarEvent.message` keeps the last 4096 built)
and a frozen chunk's ends are an ``array('q')``.  What does not grow: the libraries (~170 MB), the
comparison's runs over the last three tolerances of traffic (at this file's 20k client messages a
second about 240k runs, ~110 MB, reached after ~400k events, flat after) and the file-backed part
(66-69 MB whatever the file's size: `ReplayFileInput` gives the mapping's pages back after each batch).

The comparison's cost (issue 13, branch i13cmp; shared 2-core machine, load 2-3; paired with cf58845):
each compared send in the lane found both sides with one lookup (`SteadyLane._Pair`), a series' runs
kept as columns with a `_Run` made only as a handle when a check or a divergence needs one, one call to
add a send (`_Series.append`, no extend-then-begin), a recorded send's record kept as its position, the
prune found by bisection.  Same trace bytes (the bench's 0d76bce1..., every real capture with and
without agent logs, the 401k capture's replay file).  500k events: the comparison alone (its recorded
calls replayed in process, 3 pairs) 0.84-0.85 s -> 0.59-0.60 s; the lane loop (3 pairs) 2.37-2.51 s ->
2.13-2.24 s; end to end --json (5 pairs, CPU medians) 4.2 s -> 4.0 s (63,497 -> 66,638 inbound ev/s),
peak RSS 244 -> 229 MB.  What is left of the comparison is interpreter work spread over each send's
lookup, append and check (about 1.3 us a compared send, a quarter of the lane); the next factor is
comparing a periodic series' sends in bulk (issue 13, item 2), not a cheaper object per send.

Tenth session, all of it together (issue 13; paired with cf58845, 5 rounds, CPU medians, a quieter spell of
the machine): the two branches above, and around the lane: the command's process ends without the
interpreter's teardown (0.4-0.7 s of freeing after the last line) and without BLAS threads; ``--json``
writes a block of lines a chunk at a time (`ReplaySession.line_blocks`); lane rows read ``extra`` without
regular expressions when every row has the plain spelling (0.34 -> 0.26 s); the text timeline gets the
lane's records built from their values, not parsed back from their lines (`steady.RECORD_OF`); opening
the file loads neither pydantic, Arrow's group-by engine nor the capture importers (a small replay's
start 0.62 -> 0.36 s CPU).

    500k events:  --json 4.2 s -> 2.5 s (64,654 -> 108,076 inbound ev/s, every round 98.9k-109.4k),
        244 -> 200 MB;  text 5.4 s -> 3.1 s (49,995 -> 86,495);  text / json 1.29x -> 1.25x.
        Same trace sha256 (0d76bce1...).
    10M events (one run, load about 1.4):  --json 53.5 s (100,566 inbound ev/s; was 64,539), 238 MB
        (was 287 MB).  Same trace sha256 (373b78ce...).

Where the 2.5 s go now (py-spy): the lane 1.6 s (its model side and comparison about even, no part over
10 %), making the lane rows 0.26 s (of which building the 17-value tuples 0.08-0.2 s), start-up and
opening the file 0.45 s, the lines' hash and writing 0.1 s, the collector 0.15 s.  Replacing the model
runs' record recipes by markers (125k fewer tuples alive) measured 1-2 % and was dropped.

Eleventh session (issue 13): the lane's loop compiled, `engine._window` (Cython, optional: setup.py builds it
when there is a C compiler; without one the same bytes come from the Python loop).  Each member's state is
held in C between the points where Python code may read it, the comparison's hot path works on the same
series in C (a pair's series held once a chunk, passed checks settled in the loop), a compared send's run
keeps its trace line as its record, lines are written without ``%`` or ``snprintf``, the rows are read
from their columns (`steady.LaneRows`: no 17-tuples), and the text timeline's records are built from
recipes learnt from `steady.RECORD_OF` and given with their lines; `describe_send` writes a cluster at
work's sends at once.  The start: Arrow's kernels called without `pyarrow.compute`'s wrappers
(`formats.arrow_compute`), no `numpy.ma`, the text renderer and cluster replay imported only when used
(a small replay 0.31 -> 0.26 s CPU).  Paired with c4badf3 (the tenth session's end), 5 rounds, CPU medians,
bytecode cached (``PYTHONPYCACHEPREFIX`` set; the figures above compiled every module in each run):

    500k events:  --json 2.6 s -> 1.3 s (103,125 -> 210,542 inbound ev/s), 200 -> 204 MB;  text 3.1 s ->
        1.9 s (86,686 -> 140,089);  text / json 1.19x -> 1.50x.  Same trace sha256 (0d76bce1...).
    10M events (one run):  --json 36.7 s CPU (146,811 inbound ev/s; was 53.5 s, 100,566), 233 MB;  text
        50.1 s (107,561), 237 MB, text / json 1.36x.  Same trace sha256 (373b78ce...).

Where the 1.3 s go now (500k): start-up and opening the file about 0.4 s; the rows 0.2 s (Python ints and
strings of each column); the compiled loop about 0.6 s, nearly all of it Python object work it asks for
(each compared send's run appended to the series' lists, its key tuple and check entry, each line's str,
attribute reads of agents, series and pairs: `benchmarks/bench_lane_instructions.py` counts it); hashing
and writing 0.1 s.  The text timeline costs its records (0.3 s) and their descriptions (0.35 s, Python:
`print_timeline`, `describe_send`) on top of ``--json``'s work, so each cut of ``--json`` raises the ratio.

Twelfth session (issue 13).  The runs now use bytecode compiled beforehand (`_bytecode_cache`): the session's
environment had PYTHONDONTWRITEBYTECODE set, and every run compiled every module (about 0.1 s), which no
installed recount does.  ``--json`` hashes and writes a chunk's lines as one bytes, joined once in C
(`engine._window.encoded_lines`); the compiled loop reads a row's values from its columns' item arrays,
writes a line into a new str in place, reaches the comparison's slots by offset, and keeps no record object
for a model run of AppendPosition or CommitPosition (`engine.replay._RunRecipe`: its record is made from the
run if a divergence shows it), which took the lines out of the comparison's window (peak RSS down 30 MB, and
the per-event cost of a long replay with them); opening a file summarises its batches through a table.  The
text timeline takes the lane's records as their values (`ReplaySession.timeline_blocks`, in chunks of 2048
rows), and writes a run of them in one call (`engine._window.LaneText.lines_into`).  Paired with 963d787 (the
eleventh session's end), medians, CPU:

    500k events, 7 rounds:  --json 0.96 s -> 0.84 s (280,137 -> 321,932 inbound ev/s), 203 -> 176 MB;  text
        1.55 s -> 1.03 s (174,197 -> 262,350);  text / json 1.61x -> 1.23x (every round 1.14-1.28x).  Same sha
        (0d76bce1...).  Earlier rounds of the day, on slower spells of the machine: --json 311,578 and
        313,735 against 262,538 and 274,553; text / json 1.35x.
    10M events, 3 rounds:  --json 21.8 s -> 15.7 s (246,633 -> 343,675 inbound ev/s; every round 15.5-16.0 s
        against 20.1-22.0 s), 235 -> 207 MB.  Same sha (373b78ce...).  One later run on a slower spell: --json
        18.7 s (287,835), text 21.0 s (1.12x).
    callgrind (`bench_lane_instructions.py`, 60k events): the compiled loop 635.4M -> 504.9M instructions.

Where the 0.84 s go now (500k): start-up and opening the file about 0.3 s (the interpreter 0.05, imports 0.15,
the open 0.1); the rows 0.12 s; the compiled loop 0.45 s; hashing and writing about 0.05 s.  The loop's cost
per event rises as the comparison's window fills (its runs are Python objects: about 240k of them after the
first 0.3 s of this traffic): each later million events of the 10M file costs about a third more than the
first (1.44 s, then 1.66-2.03 s, in one slow spell of the machine), so the 500k file flatters a long replay.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_replay  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.ipc as ipc  # noqa: E402

from formats import replay_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
US = 1_000
MS = 1_000_000
#: Client messages generated at a time (13 events each with the recorded sends).
CHUNK_MESSAGES = 20_000
EVENTS_PER_MESSAGE = 13
INBOUND_PER_MESSAGE = 7


def _conformed(table: pa.Table, schema: pa.Schema, first_seq: int) -> pa.Table:
    """``table`` with ``schema``'s columns (missing ones null), its dictionaries and seqs from ``first_seq``."""
    arrays = []
    for field in schema:
        if field.name == "seq":
            arrays.append(pa.array(np.arange(first_seq, first_seq + table.num_rows, dtype=np.uint64)))
        elif field.name not in table.column_names:
            arrays.append(pa.nulls(table.num_rows, field.type))
        elif pa.types.is_dictionary(field.type):
            values = table.column(field.name).combine_chunks().cast(pa.string())
            dictionary = _DICTIONARIES[field.name]
            indices = pc.index_in(values, value_set=dictionary)
            assert indices.null_count == 0, f"a {field.name} the first chunk does not have"
            arrays.append(pa.DictionaryArray.from_arrays(indices, dictionary))
        else:
            arrays.append(table.column(field.name).combine_chunks().cast(field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


_DICTIONARIES: dict[str, pa.Array] = {}


def write_file(path: Path, events_wanted: int) -> tuple[int, int]:
    """Write the replay file; returns (events, inbound events)."""
    election, session_id = bench_replay.election()
    election.sort(key=lambda e: e.ts)  # stable: ties keep the order they were recorded in
    messages = max(0, -(-(events_wanted - len(election)) // EVENTS_PER_MESSAGE))
    start_ns = 400 * MS
    written = inbound = 0
    writer = None
    schema = None
    pending = election
    done = 0
    temporary = path.with_name(path.name + ".tmp")
    with pa.OSFile(str(temporary), "wb") as sink:
        while done < messages or pending:
            count = min(CHUNK_MESSAGES, messages - done)
            if count:
                chunk_start = start_ns + done * 50 * US
                pending = pending + bench_replay.steady_state(chunk_start, count, outs=True, session_id=session_id,
                                                              position=96 + done * 96)
                done += count
                # Everything generated later happens at or after the next message's time.
                horizon = start_ns + done * 50 * US if done < messages else None
            else:
                horizon = None
            pending.sort(key=lambda e: e.ts)
            if horizon is None:
                ready, pending = pending, []
            else:
                cut = next((i for i, e in enumerate(pending) if e.ts >= horizon), len(pending))
                ready, pending = pending[:cut], pending[cut:]
            if not ready:
                continue
            table = replay_file.events_to_table(ready, source="bench_replay_file")
            if schema is None:
                # The first chunk holds every message type the file will hold (the election's and the
                # steady state's), so its columns are every column.
                schema = table.schema
                for name in ("dir", "channel", "type"):
                    _DICTIONARIES[name] = table.column(name).combine_chunks().dictionary
                writer = ipc.new_file(sink, schema)
            writer.write_table(_conformed(table, schema, written), max_chunksize=65536)
            written += len(ready)
            inbound += sum(1 for e in ready if e.dir == "in")
        if writer is not None:
            writer.close()
    os.replace(temporary, path)
    return written, inbound


def _counts(path: Path) -> tuple[int, int]:
    with pa.memory_map(str(path)) as source:
        reader = ipc.open_file(source)
        rows = inbound = 0
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            rows += batch.num_rows
            inbound += pc.sum(pc.equal(batch.column("dir"), "in")).as_py() or 0
    return rows, inbound


def _sample(pid: int, peaks: dict[str, int], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"\0cli\0" not in cmdline.read():  # not exec'd yet: still a copy of this process
                    stop.wait(0.01)
                    continue
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    key = line.split(":")[0]
                    if key in ("RssAnon", "RssFile", "VmHWM"):
                        peaks[key] = max(peaks.get(key, 0), int(line.split()[1]))
        except OSError:
            return
        stop.wait(0.2)


def _bytecode_cache(tree: Path) -> str:
    """A bytecode cache of ``tree``'s own, filled before the runs: an installed package has its modules
    compiled (pip writes the .pyc at install; an editable install's first run writes them), so compiling
    every module in every run (about 0.1 s, as with PYTHONDONTWRITEBYTECODE set) is not what a user waits for."""
    cache = Path(tempfile.gettempdir()) / "recount-bench-pycache" / hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:16]
    environment = {**os.environ, "PYTHONPYCACHEPREFIX": str(cache)}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(tree / part) for part in ("cli", "engine", "formats",
                                                                                             "recorder"))],
                   env=environment, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-c", "import cli.app, engine.replay, recorder.convert, numpy, pyarrow, rich"],
                   env={**environment, "PYTHONPATH": str(tree)}, cwd=str(tree), check=True)
    return str(cache)


_CACHES: dict[Path, str] = {}


def run_once(tree: Path, arguments: list[str]) -> dict:
    """One fresh `recount` process: wall and CPU seconds, peak RSS (kB), sampled anon/file peaks, sha."""
    if tree not in _CACHES:
        _CACHES[tree] = _bytecode_cache(tree)
    environment = {**os.environ, "PYTHONPATH": str(tree), "RECOUNT_PROGRESS": "0", "PYTHONPYCACHEPREFIX": _CACHES[tree]}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "cli", *arguments], cwd=str(tree), env=environment,
                                   stdout=out, stderr=subprocess.DEVNULL)
        peaks: dict[str, int] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(process.pid, peaks, stop), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        stop.set()
        sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(arguments)} in {tree} exited {process.returncode}")
        out.seek(max(0, out.seek(0, 2) - 4096))
        tail = out.read().decode("utf-8", "replace").strip().splitlines()
    sha = None
    if tail and tail[-1].startswith('{"kind":"summary"'):
        sha = json.loads(tail[-1]).get("traceSha256")
    # The peak RSS is the process's own high-water mark (VmHWM, read until it exits): ru_maxrss would
    # also count the pages of this process that the child shared between fork and exec.
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss": peaks.get("VmHWM", usage.ru_maxrss),
            "anon": peaks.get("RssAnon", 0), "file": peaks.get("RssFile", 0), "sha": sha}


def _streamed_lines(path: Path):
    from engine.replay import replay_lines
    from recorder.convert import ReplayFileInput

    opened = ReplayFileInput(path)
    return replay_lines(opened.ordered(None))


#: Where the time goes, by layer: the own time of every function, grouped by where it is.
LAYERS = (
    ("reading the file (formats/replay_file.py, recorder/convert.py, pyarrow)",
     ("formats/replay_file.py", "recorder/convert.py", "pyarrow", "numpy")),
    *bench_replay.LAYERS,
)


def profile(path: Path, inbound: int) -> int:
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    started = time.process_time()
    profiler.enable()
    for _ in _streamed_lines(path):
        pass
    profiler.disable()
    elapsed = time.process_time() - started
    stats = pstats.Stats(profiler, stream=io.StringIO())
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
    print(f"profiled: {elapsed:.1f} s of CPU under cProfile ({inbound / elapsed:,.0f} inbound events/s)")
    for name, seconds in totals.items():
        print(f"  {seconds / total:6.1%}  {name}")
    print(f"  {other / total:6.1%}  everything else (builtins, heapq, bisect, ...)")
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
    lines = text.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    print("\n".join(lines[start : start + 21]))
    return 0


def memory(path: Path) -> int:
    import tracemalloc

    from engine.replay import ReplaySession
    from recorder.convert import ReplayFileInput

    session = ReplaySession(ReplayFileInput(path).ordered(None))
    tracemalloc.start(1)
    half = None
    for _ in session.lines():
        if half is None and session.position >= len(session) // 2:
            half = tracemalloc.take_snapshot()
    end = tracemalloc.take_snapshot()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    def by_module(snapshot) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for stat in snapshot.statistics("filename"):
            name = stat.traceback[0].filename
            name = name[len(str(ROOT)) + 1 :] if name.startswith(str(ROOT)) else Path(name).name
            sizes[name] = sizes.get(name, 0) + stat.size
        return sizes

    at_half, at_end = by_module(half), by_module(end)
    print(f"traced peak {peak / 1e6:,.1f} MB; held at the end (and at the middle), by module:")
    for name, size in sorted(at_end.items(), key=lambda item: -item[1])[:14]:
        print(f"  {size / 1e6:8.1f} MB  ({at_half.get(name, 0) / 1e6:6.1f} MB)  {name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the replay file")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the replay file is kept (and reused)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="json,text", help="json, text or both")
    parser.add_argument("--before", help="another checkout to run alternately (its recount replay)")
    parser.add_argument("--profile", action="store_true", help="profile the streamed replay in this process")
    parser.add_argument("--memory", action="store_true", help="what the streamed replay holds, by module")
    options = parser.parse_args(argv)

    path = Path(options.dir) / f"bench_replay_file-{options.events}.arrow"
    if not path.exists():
        started = time.perf_counter()
        events, inbound = write_file(path, options.events)
        print(f"wrote {path}: {events:,} events ({inbound:,} inbound), {path.stat().st_size / 1e6:,.0f} MB, "
              f"in {time.perf_counter() - started:.0f} s")
    events, inbound = _counts(path)
    print(f"file: {path} ({events:,} events, {inbound:,} inbound, {path.stat().st_size / 1e6:,.0f} MB)")
    if options.profile:
        return profile(path, inbound)
    if options.memory:
        return memory(path)
    trees = {"after": ROOT} if not options.before else {"before": Path(options.before), "after": ROOT}
    modes = [m.strip() for m in options.modes.split(",") if m.strip()]
    results: dict[tuple[str, str], list[dict]] = {}
    for round_number in range(options.runs):
        for mode in modes:
            for name, tree in trees.items():
                arguments = ["replay", str(path)] + (["--json"] if mode == "json" else [])
                result = run_once(tree, arguments)
                results.setdefault((name, mode), []).append(result)
                print(f"  run {round_number + 1} {name:6} {mode:4}: {result['wall']:7.2f} s wall, {result['cpu']:7.2f} s CPU,"
                      f" {inbound / result['cpu']:9,.0f} inbound ev/s, peak RSS {result['maxrss'] / 1024:6,.0f} MB"
                      f" (anon {result['anon'] / 1024:,.0f}, file {result['file'] / 1024:,.0f}) sha {result['sha']}",
                      flush=True)
    print()
    for (name, mode), runs in results.items():
        cpu = statistics.median(r["cpu"] for r in runs)
        wall = statistics.median(r["wall"] for r in runs)
        peak = max(r["maxrss"] for r in runs)
        print(f"{name:6} {mode:4}: median {wall:.2f} s wall, {cpu:.2f} s CPU: {inbound / cpu:,.0f} inbound events/s per"
              f" core ({events / cpu:,.0f} events/s); peak RSS {peak / 1024:,.0f} MB")
    for name in trees:
        if (name, "json") in results and (name, "text") in results:
            ratio = (statistics.median(r["cpu"] for r in results[(name, "text")])
                     / statistics.median(r["cpu"] for r in results[(name, "json")]))
            print(f"{name:6} text / json (CPU): {ratio:.2f}x (target: within 1.5x)")
    shas = {r["sha"] for (name, mode), runs in results.items() if mode == "json" for r in runs}
    print(f"trace sha256 of every json run: {', '.join(sorted(map(str, shas)))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
